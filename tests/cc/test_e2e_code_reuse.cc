// End-to-end test of PyPerf on code objects freed and made again at the same
// addresses (issue 35), on every CPython version: the host and container
// interpreters of support/version_targets.h (pyenv 2.7 .. 3.13, Debian's
// static 3.11, trixie's 3.13, sid's 3.14 and 3.15) and the free-threaded 3.13t.
// Its other layouts (a shared libpython loaded by another program, uWSGI, a
// deleted libpython) run the same interpreters' code objects, so they are
// left out here.
//
// Each interpreter runs workloads/code_reuse.py: generation after generation
// of outer_III -> inner_III -> K_III.make / K_III.spin, exec'd under the file
// name generated_FFF.py with the definitions L lines down, each generation
// changing exactly one of III, FFF and L from the one before, in turn, every
// name as long as every other, each generation freed (gc.collect) before the
// next is made, so its code objects, name strings and class land at addresses
// the one before had; the workload counts how many generations did. A
// profiler that names a frame from what it saw at the same address before (a
// cache trusting a stale entry) would print the generation before's name,
// class, file or line; one that checks only some of them is caught by the
// generations where only another changed. All the workloads are profiled by
// one PyPerf, and every generated frame of every sample must be the
// generation's that ran when the sample was taken (the thread's name,
// gen_NNNNNN, says which: the kernel's, read afresh each sample): its names'
// number, file and first line; outer directly calls inner, which calls make
// or spin.
//
// The workloads wait (idle) until PyPerf is ready, then each runs its
// generations for the same CPU time and goes idle again, so a busy machine
// lengthens the run rather than thinning the samples.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/collapsed.h"
#include "support/e2e.h"
#include "support/python_roots.h"
#include "support/test_support.h"
#include "support/version_workloads.h"

namespace pyperf_test {
namespace {

constexpr char kWorkload[] = "code_reuse.py";
// The file names generations are compiled under (code_reuse.py's
// GENERATED_FILE: kGeneratedFilePrefix + FFFFFF + ".py"), and the driver
// function that execs and calls them.
constexpr char kGeneratedFilePrefix[] = "/code_reuse/generated_";
constexpr char kDriverFunction[] = "run_generation";
// The main thread's name while generation N runs: kCommPrefix + NNNNNN.
constexpr char kCommPrefix[] = "gen_";
// CPU time each workload spends on generations once released: at PyPerf's
// default 1 kHz, some 600 samples, 120 to 250 generations.
constexpr char kWorkloadCpuSeconds[] = "0.6";
// Floors that make the checks mean something: samples naming a generation,
// distinct generations among them, and generations that reused an address of
// an earlier one (measured: all but the first, on every version).
constexpr uint64_t kMinGeneratedSamples = 100;
constexpr size_t kMinSampledGenerations = 20;
constexpr int kMinReusedGenerations = 20;
constexpr double kMinReusedPercent = 80.0;
// Generations, over every version, that only the text of their names, of
// their file name, or their lines tell from the generation before.
constexpr int kMinSamePointerGenerations = 10;
// Samples that may carry an error marker (shared, busy machine).
constexpr double kMaxErrorPercent = 2.0;
// How long all the workloads together may take to run their generations.
constexpr auto kRunDeadline = seconds(180);

// "key=value ..." after the first word of the workload's line starting with
// `word`, as numbers; empty if there is no such line.
std::map<std::string, int> WorkloadFigures(const std::string& output, const std::string& word) {
  std::map<std::string, int> figures;
  for (const auto& line : SplitLines(output)) {
    if (line.rfind(word + " ", 0) != 0) continue;
    std::istringstream in(line.substr(word.size() + 1));
    std::string field;
    while (in >> field) {
      size_t eq = field.find('=');
      if (eq != std::string::npos) figures[field.substr(0, eq)] = std::stoi(field.substr(eq + 1));
    }
  }
  return figures;
}

// Generation N of code_reuse.py changes one thing from generation N - 1, in
// turn (its identity()): its names' number (N % 3 == 1), its file name's
// (N % 3 == 2), its first lines (N % 3 == 0). So each alone tells two
// consecutive generations apart, at addresses the earlier one's objects had.
struct GenerationIdentity {
  int names = 0, file = 0, blank_lines = 0;
};

// What the workload's "lines" line says: each kind's co_firstlineno at
// generation 0, and how many line shifts there are.
struct GeneratedLines {
  std::map<std::string, int> first;  // "outer", "inner", "make", "spin", "class", "subclass"
  int period = 0;
  GenerationIdentity Identity(int generation) const {
    const int k = generation / 3, r = generation % 3;
    return {k + (r >= 1), k + (r >= 2), period > 0 ? k % period : 0};
  }
  int Of(const std::string& kind, int generation) const {
    return first.at(kind) + Identity(generation).blank_lines;
  }
};

// A Python frame of a generated file: its kind and its names' number
// ("module", the generated module's own code, has none).
struct GeneratedFrame {
  // "module", "outer", "inner", "class", "subclass" (their statements'
  // bodies), "make", "spin"
  std::string kind;
  int names = -1;
};

// The number NNNNNN of `name` = prefix + NNNNNN, or -1.
int GenerationIn(const std::string& name, const std::string& prefix) {
  if (name.size() != prefix.size() + 6 || name.compare(0, prefix.size(), prefix) != 0) return -1;
  std::string digits = name.substr(prefix.size());
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  return std::stoi(digits);
}

std::optional<GeneratedFrame> ClassifyGenerated(const PythonFrame& frame) {
  if (frame.class_name.empty()) {
    if (frame.function == "<module>") return GeneratedFrame{"module"};
    for (const char* kind : {"outer", "inner"})
      if (int n = GenerationIn(frame.function, std::string(kind) + "_"); n >= 0)
        return GeneratedFrame{kind, n};
    // A class statement's body, a code object named after the class.
    if (int n = GenerationIn(frame.function, "K_"); n >= 0) return GeneratedFrame{"class", n};
    if (int n = GenerationIn(frame.function, "L_"); n >= 0) return GeneratedFrame{"subclass", n};
    return std::nullopt;
  }
  // make and spin run for K_III and its subclass L_III.
  int n = GenerationIn(frame.class_name, "K_");
  if (n < 0) n = GenerationIn(frame.class_name, "L_");
  if (n >= 0 && (frame.function == "make" || frame.function == "spin"))
    return GeneratedFrame{frame.function, n};
  return std::nullopt;
}

// The number FFFFFF of a generated file's name, or -1 if it is not one.
int GeneratedFileNumber(const std::string& file) {
  const std::string suffix = ".py";
  if (file.size() < suffix.size() ||
      file.compare(file.size() - suffix.size(), suffix.size(), suffix) != 0)
    return -1;
  return GenerationIn(file.substr(0, file.size() - suffix.size()), kGeneratedFilePrefix);
}

// The generated frames a sample may end with, root first: exec'ing the
// module (and its class statement), or calling into generation N.
const std::set<std::vector<std::string>>& AllowedShapes() {
  static const std::set<std::vector<std::string>> shapes = {
      {"module"},         {"module", "class"},        {"module", "subclass"},  {"outer"},
      {"outer", "inner"}, {"outer", "inner", "make"}, {"outer", "inner", "spin"},
  };
  return shapes;
}

struct SampleVerdict {
  std::string problem;  // why the sample is wrong; empty if it is right
  int generation = -1;  // the generation its generated frames are of, if any
  std::string leaf;     // the kind of its innermost generated frame, if any
};

// Checks one sample of a code_reuse.py process whose script is `driver_file`
// (as the process names it) and which made `generations` generations. The
// thread's name says which generation ran when the sample was taken; every
// generated frame must be that generation's: its names' number, its file and
// its first line (a frame named from what an earlier generation left at the
// same address gets one of them wrong, whichever the checks on a reused
// address missed). A sample with an error marker may have lost frames: its
// frames are checked each on its own, not its shape.
SampleVerdict CheckSample(const CollapsedLine& line, const std::string& driver_file,
                          const GeneratedLines& lines, int generations) {
  SampleVerdict verdict;
  const bool marked = !ErrorMarkers(line).empty() || IsTruncated(line);
  const int running = GenerationIn(line.comm, kCommPrefix);
  std::vector<std::string> shape;
  std::string last_driver_function;
  for (const auto& text : FramesOfKind(line, FrameKind::kPython)) {
    std::string why;
    auto frame = ParsePythonFrame(text, &why);
    if (!frame) {
      verdict.problem = "a Python frame that does not parse (" + why + "): " + text;
      return verdict;
    }
    if (frame->file == driver_file) {
      if (!shape.empty()) {
        verdict.problem = "a frame of the workload called by a generated one: " + text;
        return verdict;
      }
      last_driver_function = frame->function;
      continue;
    }
    const int file_number = GeneratedFileNumber(frame->file);
    auto generated = file_number >= 0 ? ClassifyGenerated(*frame) : std::nullopt;
    if (!generated) {
      verdict.problem = "a frame no generation has: " + text;
      return verdict;
    }
    if (running < 0 || running >= generations) {
      verdict.problem = "a generated frame in a sample of thread \"" + line.comm +
                        "\", which runs no generation made (" + std::to_string(generations) +
                        " were): " + text;
      return verdict;
    }
    const GenerationIdentity want = lines.Identity(running);
    const std::string of_running = "generation " + std::to_string(running) + "'s ";
    if (file_number != want.file) {
      verdict.problem = "file number " + std::to_string(file_number) + ", not " + of_running +
                        std::to_string(want.file) + ": " + text;
    } else if (generated->kind == "module") {
      if (frame->line != 1) verdict.problem = "the generated module not on line 1: " + text;
    } else if (generated->names != want.names) {
      verdict.problem = "names number " + std::to_string(generated->names) + ", not " +
                        of_running + std::to_string(want.names) + ": " + text;
    } else if (frame->line != lines.Of(generated->kind, running)) {
      verdict.problem = "line " + std::to_string(frame->line) + ", not " + of_running +
                        "first line " + std::to_string(lines.Of(generated->kind, running)) +
                        ": " + text;
    }
    if (!verdict.problem.empty()) return verdict;
    shape.push_back(generated->kind);
    verdict.generation = running;
    verdict.leaf = generated->kind;
  }
  if (marked || shape.empty()) return verdict;
  if (!AllowedShapes().count(shape)) {
    std::string kinds;
    for (const auto& kind : shape) kinds += (kinds.empty() ? "" : " -> ") + kind;
    verdict.problem = "generated frames " + kinds + ", which no generation calls";
  } else if (last_driver_function != kDriverFunction) {
    verdict.problem =
        "generated frames called by \"" + last_driver_function + "\", not by " + kDriverFunction;
  }
  return verdict;
}

// What code_reuse.py printed when ready: its code objects' first lines.
std::string ReadGeneratedLines(const VersionWorkload& w, GeneratedLines* lines) {
  auto figures = WorkloadFigures(w.process->Stdout(), "lines");
  lines->period = figures["period"];
  figures.erase("period");
  lines->first = figures;
  if (lines->first.size() != 6 || lines->period < 2)
    return "no \"lines\" line with six kinds and a period";
  return "";
}

TEST(CodeAddressReuse, EverySampleNamesItsOwnGenerationOnEveryVersion) {
  PYPERF_REQUIRE_BPF();
  auto workloads = StartOnEveryVersion(
      kWorkload, [](VersionWorkload*) { return std::vector<std::string>{kWorkloadCpuSeconds}; });
  if (!ReportUnavailable(workloads)) PYPERF_SKIP_OR_FAIL("no interpreter to run");
  std::map<std::string, GeneratedLines> generated_lines;  // by workload name
  WaitUntilReady(workloads, [&](VersionWorkload* w) {
    return ReadGeneratedLines(*w, &generated_lines[w->name]);
  });

  // One PyPerf for every workload; Python frames only, so that PyPerf's own
  // CPU (two cores shared with a dozen interpreters) goes to what is checked;
  // -v 2 for its code object cache's counts at the dump.
  auto pyperf = ProfileReleasedWorkloads({"--user-stacks-pages", "0", "-v", "2"}, workloads,
                                         "done ", kRunDeadline);
  ASSERT_TRUE(pyperf);
  pyperf->Signal(SIGTERM);
  PyPerfRun run = FinishPyPerf(*pyperf, "PyPerf -p (every workload)", kPyPerfTimeout);

  // The code object cache was used (a cache never hit would test nothing):
  // frames named from it, and by their strings.
  unsigned long long cache_hits = 0, cache_misses = 0;
  for (const std::string& line : SplitLines(run.stderr_text)) {
    const size_t at = line.find("code objects: frames named from the cache ");
    if (at != std::string::npos)
      sscanf(line.c_str() + at,
             "code objects: frames named from the cache %llu, by their strings %llu", &cache_hits,
             &cache_misses);
  }
  std::printf("[ reuse ] frames named from the code object cache %llu, by their strings %llu\n",
              cache_hits, cache_misses);
  EXPECT_GT(cache_hits, 0u) << run.stderr_text;
  // "same pointers": generations with a code object whose address and name
  // and file objects' addresses were all the generation before's, by what
  // changed from it (names, file, lines): only that change's text (or line)
  // tells them apart.
  std::printf("%-22s %5s %6s %6s %6s %6s %17s %7s %9s %5s %6s %5s\n", "version", "gens", "code",
              "type", "name", "c+n+l", "same pointers", "samples", "generated", "gens", "marked",
              "wrong");
  std::printf("%-22s %5s %6s %6s %6s %6s %17s %7s %9s %5s %6s %5s\n", "", "made", "reused",
              "reused", "reused", "reused", "name/file/line", "", "", "seen", "", "");
  std::map<std::string, int> same_pointers;  // by what changed, over every version
  for (const auto& w : workloads) {
    if (!w->process) continue;
    SCOPED_TRACE(w->name + " (pid " + std::to_string(w->pid) + ")");
    std::map<std::string, int> done = WorkloadFigures(w->process->Stdout(), "done");
    for (const char* change : {"names", "file", "lines"})
      same_pointers[change] += done[std::string("same_pointers_") + change + "_changed"];
    const int generations = done["generations"];
    EXPECT_TRUE(w->process->Running() && generations > 0)
        << "code_reuse.py did not finish its generations; stdout:\n"
        << w->process->Stdout() << "\nstderr:\n"
        << w->process->Stderr();
    // Reuse happened, or nothing here could fail.
    for (const char* what : {"code_reused", "type_reused"}) {
      EXPECT_GE(done[what], kMinReusedGenerations) << what << " of " << generations;
      EXPECT_GE(100.0 * done[what], kMinReusedPercent * generations)
          << what << " of " << generations;
    }

    auto lines = run.profile.OfPid(w->pid);
    ExpectWellFormed(lines);
    ExpectFewErrorMarkers(lines, kMaxErrorPercent);
    uint64_t total = 0, generated = 0, marked = 0, wrong = 0;
    std::map<std::string, uint64_t> leaves;
    std::set<int> sampled_generations;
    std::vector<std::string> wrong_examples;
    for (const auto& line : lines) {
      total += line.count;
      if (!ErrorMarkers(line).empty()) marked += line.count;
      SampleVerdict verdict =
          CheckSample(line, w->script, generated_lines[w->name], generations);
      if (!verdict.problem.empty()) {
        wrong += line.count;
        if (wrong_examples.size() < 8)
          wrong_examples.push_back(verdict.problem + "\n    in " + line.text);
        continue;
      }
      if (verdict.generation < 0) continue;
      generated += line.count;
      leaves[verdict.leaf] += line.count;
      sampled_generations.insert(verdict.generation);
    }
    std::string examples;
    for (const auto& e : wrong_examples) examples += "\n  " + e;
    EXPECT_EQ(wrong, 0u) << wrong << " of " << total
                         << " samples name what their generation does not have:" << examples;
    EXPECT_GE(generated, kMinGeneratedSamples) << "samples naming a generation, of " << total;
    EXPECT_GE(sampled_generations.size(), kMinSampledGenerations) << "generations sampled";
    for (const char* leaf : {"inner", "make", "spin"})
      EXPECT_GT(leaves[leaf], 0u) << "no sample of generation N's " << leaf << Excerpt(lines);
    const std::string same_pointers = std::to_string(done["same_pointers_names_changed"]) +
                                      "/" + std::to_string(done["same_pointers_file_changed"]) +
                                      "/" + std::to_string(done["same_pointers_lines_changed"]);
    std::printf("%-22s %5d %6d %6d %6d %6d %17s %7llu %9llu %5zu %6llu %5llu\n", w->name.c_str(),
                generations, done["code_reused"], done["type_reused"], done["name_reused"],
                done["code_name_line_reused"], same_pointers.c_str(),
                static_cast<unsigned long long>(total),
                static_cast<unsigned long long>(generated), sampled_generations.size(),
                static_cast<unsigned long long>(marked), static_cast<unsigned long long>(wrong));
  }
  std::fflush(stdout);
  // Which versions' allocators put a generation's code, name and file objects
  // exactly where the generation before had its own is theirs to decide
  // (measured: 3.9, 3.11, 3.12 and Debian's 3.11, some 40 generations each);
  // somewhere among them it happens for each kind of change, or the checks on
  // a reused address are not all put to the test.
  for (const auto& [change, count] : same_pointers)
    EXPECT_GE(count, kMinSamePointerGenerations)
        << "generations whose code objects sat at the generation before's addresses, names and "
           "file objects included, when only its "
        << change << " changed";
}

}  // namespace
}  // namespace pyperf_test
