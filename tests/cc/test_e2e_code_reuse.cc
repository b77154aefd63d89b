// End-to-end test of PyPerf on code objects freed and made again at the same
// addresses (issue 35), on every CPython version: the host and container
// interpreters of support/version_targets.h (pyenv 2.7 .. 3.13, Debian's
// static 3.11, trixie's 3.13, sid's 3.14 and 3.15) and the free-threaded 3.13t.
// Its other layouts (a shared libpython loaded by another program, uWSGI, a
// deleted libpython) run the same interpreters' code objects, so they are
// left out here.
//
// Each interpreter runs workloads/code_reuse.py: generation after generation
// of outer_N -> inner_N -> K_N.make / K_N.spin, exec'd under one file name,
// every name as long as every other generation's, the first lines moved by
// N % 5, each generation freed (gc.collect) before the next is made, so its
// code objects, name strings and class land at addresses an earlier
// generation's had; the workload counts how many generations did. A profiler
// that names a frame from what it saw at the same address before (a cache
// trusting a stale entry) would print another generation's name, class or
// line. All the workloads are profiled by one PyPerf, and every sample of
// each must name the generation that ran when it was taken (the thread's
// name, gen_NNNNNN, says which: the kernel's, read afresh each sample), and
// name it consistently: outer_N directly calls inner_N, the class of make and
// spin is K_N of the same N, no frame names another generation, and each
// generated frame's line is that generation's co_firstlineno.
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
#include "support/version_targets.h"

namespace pyperf_test {
namespace {

constexpr char kWorkload[] = "code_reuse.py";
// The file name every generation is compiled under (code_reuse.py's
// GENERATED_FILE), and the driver function that execs and calls it.
constexpr char kGeneratedFile[] = "/code_reuse/generated.py";
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

// What the workload's "lines" line says: each kind's co_firstlineno at
// generation 0; generation N's is N % period more.
struct GeneratedLines {
  std::map<std::string, int> first;  // "outer", "inner", "make", "spin", "class"
  int period = 0;
  int Of(const std::string& kind, int generation) const {
    return first.at(kind) + generation % period;
  }
};

// A Python frame of the generated file: its kind and generation ("module",
// the generated module's own code, has none).
struct GeneratedFrame {
  std::string kind;  // "module", "outer", "inner", "class", "make", "spin"
  int generation = -1;
};

// The generation NNNNNN of `name` = prefix + NNNNNN, or -1.
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
    // The class statement's body, a code object named after the class.
    if (int n = GenerationIn(frame.function, "K_"); n >= 0) return GeneratedFrame{"class", n};
    return std::nullopt;
  }
  int n = GenerationIn(frame.class_name, "K_");
  if (n >= 0 && (frame.function == "make" || frame.function == "spin"))
    return GeneratedFrame{frame.function, n};
  return std::nullopt;
}

// The generated frames a sample may end with, root first: exec'ing the
// module (and its class statement), or calling into generation N.
const std::set<std::vector<std::string>>& AllowedShapes() {
  static const std::set<std::vector<std::string>> shapes = {
      {"module"},         {"module", "class"},        {"outer"},
      {"outer", "inner"}, {"outer", "inner", "make"}, {"outer", "inner", "spin"},
  };
  return shapes;
}

struct SampleVerdict {
  std::string problem;  // why the sample is wrong; empty if it is right
  int generation = -1;  // the generation it names, if any
  std::string leaf;     // the kind of its innermost generated frame, if any
};

// Checks one sample of a code_reuse.py process whose script is `driver_file`
// (as the process names it) and which made `generations` generations. A
// sample with an error marker may have lost frames: its frames are checked
// each on its own and against each other, not its shape.
SampleVerdict CheckSample(const CollapsedLine& line, const std::string& driver_file,
                          const GeneratedLines& lines, int generations) {
  SampleVerdict verdict;
  const bool marked = !ErrorMarkers(line).empty() || IsTruncated(line);
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
    if (frame->file != kGeneratedFile) {
      verdict.problem = "a frame of neither the workload nor the generated file: " + text;
      return verdict;
    }
    auto generated = ClassifyGenerated(*frame);
    if (!generated) {
      verdict.problem = "a generated frame no generation has: " + text;
      return verdict;
    }
    shape.push_back(generated->kind);
    if (generated->kind == "module") {
      if (frame->line != 1) verdict.problem = "the generated module not on line 1: " + text;
    } else if (generated->generation >= generations) {
      verdict.problem = "generation " + std::to_string(generated->generation) +
                        ", which was never made (" + std::to_string(generations) +
                        " were): " + text;
    } else if (verdict.generation >= 0 && generated->generation != verdict.generation) {
      verdict.problem = "generation " + std::to_string(generated->generation) +
                        " on a stack of generation " + std::to_string(verdict.generation) + ": " +
                        text;
    } else if (frame->line != lines.Of(generated->kind, generated->generation)) {
      verdict.problem = "line " + std::to_string(frame->line) + ", not generation " +
                        std::to_string(generated->generation) + "'s first line " +
                        std::to_string(lines.Of(generated->kind, generated->generation)) + ": " +
                        text;
    }
    if (!verdict.problem.empty()) return verdict;
    if (generated->generation >= 0) verdict.generation = generated->generation;
    verdict.leaf = generated->kind;
  }
  // The thread names the generation it runs: frames of another generation,
  // however consistent among themselves, are an earlier generation's names
  // read at the same addresses.
  if (!shape.empty()) {
    const int running = GenerationIn(line.comm, kCommPrefix);
    if (running < 0) {
      verdict.problem =
          "generated frames in a sample of thread \"" + line.comm + "\", which runs no generation";
      return verdict;
    }
    if (verdict.generation >= 0 && verdict.generation != running) {
      verdict.problem = "frames of generation " + std::to_string(verdict.generation) +
                        " in a sample taken while generation " + std::to_string(running) + " ran";
      return verdict;
    }
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

// One interpreter running code_reuse.py.
struct Workload {
  std::string name;
  std::string unavailable;  // why it cannot run here; "" when it runs
  // Declared before the process so the process dies first.
  std::unique_ptr<RootTempDir> root_dir;
  std::unique_ptr<ChildProcess> process;
  bool container = false;
  pid_t pid = 0;       // the interpreter's host pid
  std::string script;  // the workload's path as the process sees it
  GeneratedLines lines;
  std::map<std::string, int> done;  // the "done" line's figures
};

// Starts code_reuse.py on the interpreter of a host or container target.
void StartCodeReuse(const Target& target, Workload* w) {
  w->name = target.name;
  if (target.kind == TargetKind::kHost) {
    auto python = FindInterpreter(target.spec);
    if (!python) {
      w->unavailable = "no interpreter " + target.spec;
      return;
    }
    w->script = WorkloadPath(kWorkload);
    w->process = std::make_unique<ChildProcess>(
        std::vector<std::string>{python->path, w->script, kWorkloadCpuSeconds});
    return;
  }
  std::string why;
  auto root = EnsurePythonRoot(target.spec, &why);
  if (!root) {
    w->unavailable = "no Debian " + target.spec + " root: " + why;
    return;
  }
  w->container = true;
  w->root_dir = std::make_unique<RootTempDir>(*root);
  w->script = w->root_dir->Copy(WorkloadPath(kWorkload), kWorkload);
  w->process = std::make_unique<ChildProcess>(
      ContainerArgv(*root, {root->python, w->script, kWorkloadCpuSeconds}));
}

std::vector<std::unique_ptr<Workload>> StartWorkloads() {
  std::vector<std::unique_ptr<Workload>> workloads;
  for (const Target& target : Targets()) {
    if (target.kind != TargetKind::kHost && target.kind != TargetKind::kContainer) continue;
    workloads.push_back(std::make_unique<Workload>());
    StartCodeReuse(target, workloads.back().get());
  }
  auto free_threaded = std::make_unique<Workload>();
  free_threaded->name = "free_threaded_3_13t";
  std::string why;
  if (auto python = FreeThreadedPython(&why)) {
    free_threaded->script = WorkloadPath(kWorkload);
    free_threaded->process = std::make_unique<ChildProcess>(
        std::vector<std::string>{*python, free_threaded->script, kWorkloadCpuSeconds});
  } else {
    free_threaded->unavailable = "no free-threaded CPython: " + why;
  }
  workloads.push_back(std::move(free_threaded));
  return workloads;
}

bool Printed(ChildProcess& process, const std::string& text) {
  return process.Stdout().find(text) != std::string::npos;
}

// Waits for every started workload's "ready" and finds its interpreter's host
// pid (a container's: unshare's one child, PID 1 inside); a workload that does
// not get there is a failure, and is dropped.
void WaitUntilReady(std::vector<std::unique_ptr<Workload>>& workloads) {
  WaitFor(
      [&] {
        for (auto& w : workloads)
          if (w->process && !Printed(*w->process, "ready\n") && w->process->Running()) return false;
        return true;
      },
      kWorkloadReadyTimeout);
  for (auto& w : workloads) {
    if (!w->process) continue;
    auto fail = [&](const std::string& why) {
      ADD_FAILURE() << w->name << ": " << why << "; stdout:\n"
                    << w->process->Stdout() << "\nstderr:\n"
                    << w->process->Stderr();
      w->process.reset();
    };
    if (!Printed(*w->process, "ready\n") || !w->process->Running()) {
      fail("code_reuse.py did not become ready");
      continue;
    }
    auto figures = WorkloadFigures(w->process->Stdout(), "lines");
    w->lines.period = figures["period"];
    figures.erase("period");
    w->lines.first = figures;
    if (w->lines.first.size() != 5 || w->lines.period < 2) {
      fail("no \"lines\" line with five kinds and a period");
      continue;
    }
    if (!w->container) {
      w->pid = w->process->pid();
      continue;
    }
    auto children = ChildPids(w->process->pid());
    if (children.size() != 1) {
      fail("unshare has " + std::to_string(children.size()) + " children");
      continue;
    }
    w->pid = children[0];
  }
}

TEST(CodeAddressReuse, EverySampleNamesItsOwnGenerationOnEveryVersion) {
  PYPERF_REQUIRE_BPF();
  auto workloads = StartWorkloads();
  std::vector<std::string> unavailable;
  for (const auto& w : workloads)
    if (!w->unavailable.empty()) unavailable.push_back(w->name + ": " + w->unavailable);
  if (unavailable.size() == workloads.size()) PYPERF_SKIP_OR_FAIL("no interpreter to run");
  for (const auto& why : unavailable) {
    if (StrictMode()) ADD_FAILURE() << "PYPERF_TEST_STRICT=1 and a version cannot run: " << why;
    std::printf("[ skipped  ] %s\n", why.c_str());
  }
  WaitUntilReady(workloads);

  // One PyPerf for every workload; Python frames only, so that PyPerf's own
  // CPU (two cores shared with a dozen interpreters) goes to what is checked;
  // -v 2 for its code object cache's counts at the dump.
  std::vector<std::string> args = {"--user-stacks-pages", "0", "-v", "2"};
  for (const auto& w : workloads)
    if (w->process) args.insert(args.end(), {"-p", std::to_string(w->pid)});
  ASSERT_GT(args.size(), 2u) << "no workload is running";
  auto pyperf = StartPyPerf(args);
  ASSERT_TRUE(WaitForStderr(*pyperf, "Ready to profile", kPyPerfTimeout))
      << "PyPerf never got ready; stderr:\n"
      << pyperf->Stderr();
  for (const auto& w : workloads)
    if (w->process) kill(w->pid, SIGUSR1);
  bool all_done = WaitFor(
      [&] {
        for (auto& w : workloads)
          if (w->process && w->process->Running() && !Printed(*w->process, "done ")) return false;
        return true;
      },
      kRunDeadline);
  EXPECT_TRUE(all_done) << "the workloads did not all finish their generations in "
                        << kRunDeadline.count() << " s";
  EXPECT_TRUE(pyperf->Running()) << "PyPerf ended early; stderr:\n" << pyperf->Stderr();
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
  std::printf("%-22s %7s %6s %6s %6s %6s %8s %9s %5s %6s %5s\n", "version", "gens", "code", "type",
              "name", "c+n+l", "samples", "generated", "gens", "marked", "wrong");
  std::printf("%-22s %7s %6s %6s %6s %6s %8s %9s %5s %6s %5s\n", "", "made", "reused", "reused",
              "reused", "reused", "", "", "seen", "", "");
  for (const auto& w : workloads) {
    if (!w->process) continue;
    SCOPED_TRACE(w->name + " (pid " + std::to_string(w->pid) + ")");
    w->done = WorkloadFigures(w->process->Stdout(), "done");
    const int generations = w->done["generations"];
    EXPECT_TRUE(w->process->Running() && generations > 0)
        << "code_reuse.py did not finish its generations; stdout:\n"
        << w->process->Stdout() << "\nstderr:\n"
        << w->process->Stderr();
    // Reuse happened, or nothing here could fail.
    for (const char* what : {"code_reused", "type_reused"}) {
      EXPECT_GE(w->done[what], kMinReusedGenerations) << what << " of " << generations;
      EXPECT_GE(100.0 * w->done[what], kMinReusedPercent * generations)
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
      SampleVerdict verdict = CheckSample(line, w->script, w->lines, generations);
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
    std::printf("%-22s %7d %6d %6d %6d %6d %8llu %9llu %5zu %6llu %5llu\n", w->name.c_str(),
                generations, w->done["code_reused"], w->done["type_reused"], w->done["name_reused"],
                w->done["code_name_line_reused"], static_cast<unsigned long long>(total),
                static_cast<unsigned long long>(generated), sampled_generations.size(),
                static_cast<unsigned long long>(marked), static_cast<unsigned long long>(wrong));
  }
  std::fflush(stdout);
}

}  // namespace
}  // namespace pyperf_test
