// End-to-end test of --native-frames interleaved (issue 36) on every CPython
// version: the host and container interpreters of support/version_targets.h
// (pyenv 2.7 .. 3.13, Debian's static 3.11, trixie's 3.13, sid's stripped 3.14
// and 3.15) and the free-threaded 3.13t, all profiled by one PyPerf.
//
// Each interpreter runs workloads/interleaved_calls.py: a thread per chain of
// Python calling C calling Python (sorted with a key, Pattern.sub with a
// function, functools.reduce, a ctypes callback from libc's qsort, json.dumps
// with default=, and workloads/interleaved_ext.c, an extension built here for
// that interpreter from its own headers), each named after its chain. Every
// sample of a chain's thread must be exactly its known call chain: the
// workload's Python frames in order, each called from C preceded by a native
// frame (the C caller, named where the test knows its name: the extension's
// functions, ctypes and libc), each called from Python directly after its
// caller (3.11+, where Python calls Python inside one eval loop call), no eval
// loop frame left, and the stack whole down to the thread's first native
// frame. Two threads force the markers: one recurses through sorted() deeper
// than the copied stack holds (the default 8 pages), so its outer Python
// frames come first, root first, before "[Native Stack Copy Ended]"; one cuts
// its own Python frame chain, which then does not pair with the eval loop's
// frames: "[Unpaired Eval Loop Frames]" and every frame kept. The same dump
// written as speedscope and pprof holds the same stacks.
//
// A second PyPerf, in the default leaf mode (gProfiler's), profiles the same
// processes at the same time (issue 41): its native frames after the
// innermost Python frame run from the eval-loop frame that runs it to the
// sampled PC, named or not (sid's stripped 3.14 and 3.15 run the loop's cold
// parts with no symbol, where the unwind once went on to _start): no frame
// of the process's or a thread's start under a Python frame, the chains'
// native part begins with the eval loop, and ext_leaf's samples show the C
// call it makes (interleaved_ext.spin) after it.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "FrameSpelling.h"
#include "support/collapsed.h"
#include "support/e2e.h"
#include "support/pprof_file.h"
#include "support/speedscope_file.h"
#include "support/test_support.h"
#include "support/version_targets.h"
#include "support/version_workloads.h"

namespace pyperf_test {
namespace {

constexpr char kWorkload[] = "interleaved_calls.py";
constexpr char kExtensionSource[] = "interleaved_ext.c";
// CPU time each workload's threads share once released: at 1 kHz some 2,000
// samples, over 200 per chain, less what the rings lose (measured: half or
// more; two PyPerfs share two cores with fourteen busy interpreters).
constexpr char kWorkloadCpuSeconds[] = "2.0";
constexpr auto kRunDeadline = seconds(240);
// Fourteen interpreters importing ctypes, json and re at once, each after its
// extension was compiled, on two cores that may be busy.
constexpr auto kReadyDeadline = seconds(120);
// Floors and ceilings per version: samples of the exact chains; the share of
// them that are exact (the rest carry a marker: a sample taken as an eval
// loop call is entered or left pairs with no Python call); the share of the
// deep thread's samples whose copied stack ended.
constexpr uint64_t kMinChainSamples = 150;  // measured: 600-750
constexpr double kMinExactPercent = 95.0;
constexpr double kMinCopyEndedPercent = 50.0;
// ... and of the cut thread's samples, those that show it unpaired (before
// 3.11 an unwind that ended early, at a frame without unwind information,
// cannot tell).
constexpr double kMinUnpairedPercent = 90.0;
// Leaf mode: the share of samples (but the cut thread's) whose eval-loop
// frame was not found, and the share of ext_leaf's samples in its C call
// (the rest are in ext_leaf's own bytecode, entering or leaving the call, or
// waiting for the GIL that seven other threads want).
constexpr double kMaxEvalLoopNotFoundPercent = 2.0;
// At 250 Hz, beside the interleaved PyPerf's 1 kHz (measured: 150-250).
constexpr uint64_t kMinLeafChainSamples = 80;
constexpr double kMinLeafInCPercent = 60.0;

// A chain: its thread's name and the workload's functions it runs, in call
// order. A function called from C is marked: a native frame (its C caller)
// comes right before it, and `through` are native frames that come between it
// and the function before, in this order, each a frame whose text contains it.
struct Step {
  Step(std::string f, bool c = false, std::vector<std::string> t = {})
      : function(std::move(f)), from_c(c), through(std::move(t)) {}
  std::string function;
  bool from_c = false;
  std::vector<std::string> through;
};
struct Chain {
  std::string comm;
  std::vector<Step> steps;
};

const std::vector<Chain>& ExactChains() {
  static const std::vector<Chain> chains = {
      {"i_sorted", {{"chain_thread"}, {"run_sorted"}, {"key_leaf", true}, {"spin"}}},
      {"i_resub", {{"chain_thread"}, {"run_resub"}, {"repl_leaf", true}, {"spin"}}},
      {"i_reduce", {{"chain_thread"}, {"run_reduce"}, {"reduce_leaf", true}, {"spin"}}},
      {"i_ctypes",
       {{"chain_thread"},
        {"run_ctypes"},
        {"compare_leaf", true, {"/_ctypes", "/libc.so.6", "/_ctypes"}},
        {"spin"}}},
      {"i_json", {{"chain_thread"}, {"run_json"}, {"default_leaf", true}, {"spin"}}},
      {"i_ext",
       {{"chain_thread"}, {"run_ext"}, {"ext_leaf", true, {"ext_call_back (", "ext_level_two ("}}}},
  };
  return chains;
}

// The deep thread's chain: run_deep, then deep_level(kDeep), sorted()
// calling deep_key, which calls deep_level(kDeep - 1), and so on to
// deep_level(0), which calls spin.
constexpr int kDeep = 50;  // interleaved_calls.py's DEEP
Chain DeepChain() {
  Chain chain{"i_deep", {{"chain_thread"}, {"run_deep"}}};
  for (int level = kDeep; level > 0; --level) {
    chain.steps.push_back({"deep_level"});
    chain.steps.push_back({"deep_key", true});
  }
  chain.steps.push_back({"deep_level"});
  chain.steps.push_back({"spin"});
  return chain;
}

bool IsMarker(const std::string& frame, std::string_view text) {
  return frame == std::string(text) + std::string(ebpf::pyperf::kMarkerSuffix);
}

bool HasMarker(const CollapsedLine& line) {
  return std::any_of(line.frames.begin(), line.frames.end(),
                     [](const std::string& f) { return KindOf(f) == FrameKind::kError; });
}

bool IsEvalLoop(const std::string& frame) {
  return KindOf(frame) == FrameKind::kNative && (frame.rfind("_PyEval_EvalFrameDefault", 0) == 0 ||
                                                 frame.rfind("PyEval_EvalFrameEx", 0) == 0);
}

// A sample's frames, classified: the workload's own Python frames with their
// positions.
struct Placed {
  std::string function;
  size_t at = 0;
};

// The problem with one sample of `chain` (empty if none) whose workload file
// is `script`, for an interpreter where Python calls Python directly
// (`inlined_calls`: 3.11+). A sample without a marker must be exact and
// whole (its first frame native). With `marked`, it must carry a marker:
// what comes after the first marker is checked as in an exact sample, the
// Python frames before it only for their order.
std::string CheckChainSample(const CollapsedLine& line, const Chain& chain,
                             const std::string& script, bool inlined_calls, bool marked = false) {
  std::vector<Placed> placed;
  std::optional<size_t> marker_at;
  bool unpaired = false;
  for (size_t i = 0; i < line.frames.size(); ++i) {
    const std::string& frame = line.frames[i];
    // Unpaired, every native frame is kept, the eval loop's too.
    if (IsEvalLoop(frame) && !unpaired) return "an eval loop frame is left: " + frame;
    if (IsMarker(frame, ebpf::pyperf::kUnpairedEvalLoopFrames)) unpaired = true;
    if (KindOf(frame) == FrameKind::kError) {
      if (!marked) return "a marker: " + frame;
      if (!marker_at) marker_at = i;
      continue;
    }
    if (KindOf(frame) != FrameKind::kPython) continue;
    auto python = ParsePythonFrame(frame);
    if (!python) return "a Python frame that does not parse: " + frame;
    if (python->file == script) placed.push_back({python->function, i});
  }
  if (marked && !marker_at) return "no marker";
  if (!marked && (line.frames.empty() || KindOf(line.frames.front()) != FrameKind::kNative))
    return "the stack does not start at the thread's first native frame";
  // A sample in the loop's gate (between two calls of the chain) ends there.
  std::vector<Step> steps = chain.steps;
  if (placed.size() == 3 && placed[2].function == "gate") steps = {steps[0], steps[1], {"gate"}};
  if (placed.empty() || placed.size() > steps.size())
    return std::to_string(placed.size()) + " frames of the workload";
  for (size_t k = 0; k < placed.size(); ++k) {
    const Step& step = steps[k];
    if (placed[k].function != step.function)
      return "frame " + std::to_string(k) + " of the workload is " + placed[k].function + ", not " +
             step.function;
    if (k == 0) continue;
    // The frames between this one and its caller's. Before a marker, the
    // Python frames that could not be placed come alone: only their order is
    // checked.
    const size_t from = placed[k - 1].at, to = placed[k].at;
    if (marker_at && from < *marker_at) continue;
    const std::string& before = line.frames[to - 1];
    if (step.from_c && KindOf(before) != FrameKind::kNative)
      return step.function + ", called from C, is not preceded by a native frame";
    if (!step.from_c && inlined_calls && to != from + 1)
      return step.function + " is not right after its Python caller";
    size_t next = from + 1;
    for (const std::string& native : step.through) {
      while (next < to && !(KindOf(line.frames[next]) == FrameKind::kNative &&
                            line.frames[next].find(native) != std::string::npos))
        ++next;
      if (next == to)
        return "no native frame of \"" + native + "\" in order before " + step.function;
      ++next;
    }
  }
  return "";
}

// The cut thread's frames, as the walk finds them once cut_middle's link to
// its caller is gone.
const Chain& CutChain() {
  static const Chain chain{"i_cut", {{"cut_middle"}, {"cut_spin"}, {"spin"}}};
  return chain;
}

// The cut thread: every sample shows its Python frames (cut_middle,
// cut_spin, perhaps spin: all the walk found) first, then the marker, then
// native frames only.
std::string CheckCutSample(const CollapsedLine& line, const std::string& script) {
  const std::vector<std::string> want = {"cut_middle", "cut_spin", "spin"};
  size_t k = 0;
  bool marked = false;
  for (const std::string& frame : line.frames) {
    if (IsMarker(frame, ebpf::pyperf::kUnpairedEvalLoopFrames) && !marked) {
      marked = true;
      continue;
    }
    const FrameKind kind = KindOf(frame);
    if (marked) {
      if (kind != FrameKind::kNative && kind != FrameKind::kKernel)
        return "after the marker, a frame that is not native: " + frame;
      continue;
    }
    auto python = kind == FrameKind::kPython ? ParsePythonFrame(frame) : std::nullopt;
    if (!python || python->file != script) return "before the marker: " + frame;
    if (k >= want.size() || python->function != want[k]) return "Python frame " + frame;
    ++k;
  }
  if (!marked) return "no unpaired marker";
  return k >= 2 ? "" : "only " + std::to_string(k) + " Python frames";
}

// What the run of one version showed (the closing note's table).
struct Tally {
  uint64_t chain_samples = 0, exact = 0, marked = 0;
  std::map<std::string, uint64_t> markers;  // of the marked chain samples, by first marker
  std::map<std::string, std::string> marked_examples;  // ... a sample of each
  uint64_t deep_samples = 0, copy_ended = 0;
  uint64_t cut_samples = 0, unpaired = 0;
  // Of every sample of the process: those with a native unwind error.
  uint64_t samples = 0, native_errors = 0;
  std::string native_error_example;
  std::vector<std::string> problems;
};

// Builds the extension for the workload's interpreter, from the headers it
// names (a container's inside its root), into the workload's directory.
std::optional<std::vector<std::string>> BuildExtension(VersionWorkload* w) {
  CommandResult include = RunCommand(
      w->Argv({w->python, "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"}));
  std::string dir = include.out.substr(0, include.out.find('\n'));
  if (include.exit_code != 0 || dir.empty()) {
    ADD_FAILURE() << w->name << ": no include directory: " << include.err;
    return std::nullopt;
  }
  if (w->root) dir = w->root->dir + dir;
  std::vector<std::string> cc_argv = {
      "cc", "-shared", "-fPIC", "-O1", "-fno-inline", "-fno-optimize-sibling-calls", "-I" + dir};
  // Debian's pyconfig.h includes <x86_64-linux-gnu/python3.X/pyconfig.h>:
  // from the root, after every header of the host's own.
  if (w->root) cc_argv.insert(cc_argv.end(), {"-idirafter", w->root->dir + "/usr/include"});
  cc_argv.insert(cc_argv.end(),
                 {"-o", w->dir + "/interleaved_ext.so", WorkloadPath(kExtensionSource)});
  CommandResult cc = RunCommand(cc_argv);
  if (cc.exit_code != 0) {
    ADD_FAILURE() << w->name << ": building " << kExtensionSource << " failed:\n" << cc.err;
    return std::nullopt;
  }
  return std::vector<std::string>{w->dir_inside, kWorkloadCpuSeconds};
}

// The eval-loop frame's name for `w`'s interpreter where it has none (its
// Target's unnamed_eval_loop: "python3.14+0x"), "" where it is named.
std::string UnnamedEvalLoop(const VersionWorkload& w) {
  for (const Target& t : Targets())
    if (t.name == w.name) return t.unnamed_eval_loop;
  return "";
}

// What the leaf-mode PyPerf showed of one version (the closing note's table).
struct LeafTally {
  uint64_t samples = 0, start_frames = 0, not_found = 0, native_errors = 0;
  uint64_t chain_samples = 0, chain_ends_at_loop = 0;
  uint64_t ext_samples = 0, ext_in_c = 0;
  std::vector<std::string> problems;
  std::vector<std::string> not_found_examples, ext_examples;
};

std::string Lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& line : lines) out += "\n  " + line;
  return out;
}

// Leaf mode (the default, gProfiler's) on the same workloads: the native
// frames after the innermost Python frame run from the eval-loop frame that
// runs it to the sampled PC, named or not (sid's stripped 3.14 and 3.15 run
// the eval loop's cold part with no symbol): never a frame of the process's
// or a thread's start; each chain's native part begins with the eval loop;
// ext_leaf's samples end in the C call it makes, interleaved_ext.spin.
void CheckLeafMode(const CollapsedProfile& profile,
                   const std::vector<std::unique_ptr<VersionWorkload>>& workloads) {
  std::map<std::string, LeafTally> tallies;
  for (const auto& w : workloads) {
    if (!w->process) continue;
    LeafTally& t = tallies[w->name];
    const std::string unnamed = UnnamedEvalLoop(*w);
    auto is_eval_loop = [&](const std::string& frame) {
      return IsEvalLoop(frame) || (!unnamed.empty() && KindOf(frame) == FrameKind::kNative &&
                                   frame.rfind(unnamed, 0) == 0);
    };
    for (const CollapsedLine& line : profile.OfPid(w->pid)) {
      t.samples += line.count;
      auto problem = [&](const std::string& what) {
        if (t.problems.size() < 3) t.problems.push_back(what + "\n      in: " + line.text);
      };
      if (auto start = StartFrameUnderPythonFrame(line)) {
        t.start_frames += line.count;
        problem("a start frame under a Python frame: " + *start);
      }
      const bool not_found = std::any_of(
          line.frames.begin(), line.frames.end(),
          [](const std::string& f) { return IsMarker(f, ebpf::pyperf::kEvalLoopNotFound); });
      // The cut thread's chain has no entry frame left (its walk ends at the
      // cut): where no symbol names the loop, not finding it is the answer.
      if (not_found && line.comm != "i_cut") {
        t.not_found += line.count;
        if (t.not_found_examples.size() < 3) t.not_found_examples.push_back(line.text);
      }
      const bool native_error =
          std::any_of(line.frames.begin(), line.frames.end(), [](const std::string& f) {
            return f.rfind(ebpf::pyperf::kNativeStackErrorOpen, 0) == 0;
          });
      if (native_error) t.native_errors += line.count;
      const bool chain = std::any_of(ExactChains().begin(), ExactChains().end(),
                                     [&](const Chain& c) { return c.comm == line.comm; });
      if (!chain || HasMarker(line)) continue;
      // The native frames after the last Python frame (kernel frames last).
      size_t last_python = line.frames.size();
      for (size_t i = 0; i < line.frames.size(); ++i)
        if (KindOf(line.frames[i]) == FrameKind::kPython) last_python = i;
      if (last_python == line.frames.size()) continue;  // a thread starting or ending
      std::vector<std::string> native;
      for (size_t i = last_python + 1; i < line.frames.size(); ++i)
        if (KindOf(line.frames[i]) == FrameKind::kNative) native.push_back(line.frames[i]);
      auto leaf = ParsePythonFrame(line.frames[last_python]);
      if (!leaf || leaf->file != w->script) continue;
      t.chain_samples += line.count;
      if (!native.empty() && is_eval_loop(native.front())) {
        t.chain_ends_at_loop += line.count;
      } else {
        problem("the native frames do not begin with the eval loop");
      }
      if (line.comm == "i_ext" && leaf->function == "ext_leaf") {
        t.ext_samples += line.count;
        // ext_spin, or what it calls (PyArg_ParseTuple, Py_BuildValue).
        const std::string spin =
            ebpf::pyperf::SpellFrame(ebpf::pyperf::FrameKind::kNative, "ext_spin");
        if (std::find(native.begin(), native.end(), spin) != native.end()) {
          t.ext_in_c += line.count;
        } else if (t.ext_examples.size() < 3) {
          t.ext_examples.push_back(line.text);
        }
      }
    }
  }
  std::printf("[ leaf     ] %-28s %8s %8s %8s %8s %12s %10s\n", "version", "samples", "start",
              "not found", "unw err", "chain@loop", "ext in C");
  for (const auto& w : workloads) {
    if (!w->process) continue;
    const LeafTally& t = tallies[w->name];
    std::printf("[ leaf     ] %-28s %8llu %8llu %8llu %8llu %5llu/%-6llu %4llu/%-5llu\n",
                w->name.c_str(), (unsigned long long)t.samples, (unsigned long long)t.start_frames,
                (unsigned long long)t.not_found, (unsigned long long)t.native_errors,
                (unsigned long long)t.chain_ends_at_loop, (unsigned long long)t.chain_samples,
                (unsigned long long)t.ext_in_c, (unsigned long long)t.ext_samples);
    SCOPED_TRACE(w->name + " in leaf mode");
    for (const auto& problem : t.problems) ADD_FAILURE() << problem;
    EXPECT_EQ(t.start_frames, 0u);
    EXPECT_GE(t.chain_samples, kMinLeafChainSamples);
    EXPECT_LE(100.0 * t.not_found, kMaxEvalLoopNotFoundPercent * t.samples)
        << Lines(t.not_found_examples);
    EXPECT_GE(100.0 * t.chain_ends_at_loop, kMinExactPercent * t.chain_samples);
    EXPECT_GT(t.ext_samples, 0u);
    EXPECT_GE(100.0 * t.ext_in_c, kMinLeafInCPercent * t.ext_samples) << Lines(t.ext_examples);
  }
}

TEST(NativeFrameModes, InterleavedAndLeafSamplesAreTheirKnownChainsOnEveryVersion) {
  PYPERF_REQUIRE_BPF();
  auto workloads = StartOnEveryVersion(kWorkload, BuildExtension);
  if (!ReportUnavailable(workloads)) PYPERF_SKIP_OR_FAIL("no interpreter to run");
  std::map<std::string, int> minor;  // workload name -> Python minor version * 100
  WaitUntilReady(
      workloads,
      [&](VersionWorkload* w) -> std::string {
        int major = 0, minor_version = 0;
        const std::string out = w->process->Stdout();
        if (sscanf(out.c_str(), "version %d.%d", &major, &minor_version) != 2)
          return "no version line";
        minor[w->name] = major * 100 + minor_version;
        return "";
      },
      kReadyDeadline);

  TempDir out_dir;
  const std::string output = out_dir.File("interleaved");
  const std::string leaf_output = out_dir.File("leaf");
  // The default stack copy (--user-stacks-pages 8): the chains' stacks fit,
  // the deep thread's does not. A second PyPerf in the default leaf mode
  // profiles the same processes at the same time.
  auto pyperfs = ProfileReleasedWorkloads({{"--native-frames", "interleaved", "--insert-dso-name",
                                            "-o", output, "--format", "collapsed,speedscope,pprof"},
                                           {"-F", "250", "-o", leaf_output}},
                                          workloads, "done\n", kRunDeadline);
  ASSERT_EQ(pyperfs.size(), 2u);
  for (auto& pyperf : pyperfs) pyperf->Signal(SIGTERM);
  FinishPyPerf(*pyperfs[0], "PyPerf --native-frames interleaved", kPyPerfTimeout);
  FinishPyPerf(*pyperfs[1], "PyPerf (leaf mode)", kPyPerfTimeout);
  for (auto& pyperf : pyperfs)
    std::printf("[ dump     ] %s\n",
                DumpLines(*pyperf).empty() ? "" : DumpLines(*pyperf).back().c_str());
  CollapsedProfile leaf_profile;
  for (const std::string& file : DumpedFiles(leaf_output)) {
    CollapsedProfile dump = ParseCollapsed(ReadFile(file));
    leaf_profile.lines.insert(leaf_profile.lines.end(), dump.lines.begin(), dump.lines.end());
  }
  ASSERT_FALSE(leaf_profile.lines.empty()) << "no leaf-mode dump in " << out_dir.path();
  CheckLeafMode(leaf_profile, workloads);

  // Every dump, as collapsed text; its speedscope and pprof files hold the
  // same stacks.
  CollapsedProfile profile;
  for (const std::string& file : DumpedFiles(output)) {
    const std::string suffix = file.substr(output.size() + 1);
    if (suffix.find('.') != std::string::npos) continue;
    SCOPED_TRACE(file);
    const std::string text = ReadFile(file);
    CollapsedProfile dump = ParseCollapsed(text);
    profile.lines.insert(profile.lines.end(), dump.lines.begin(), dump.lines.end());
    const auto stacks = StackCounts(text);
    SpeedscopeFileResult speedscope = ReadSpeedscopeFile(file + ".speedscope.json", 1000000);
    EXPECT_EQ(speedscope.error, "");
    EXPECT_EQ(speedscope.collapsed, SpeedscopeViewOfCollapsed(stacks));
    PprofReadback pprof = ReadPprofWithGoTool(file + ".pb.gz");
    EXPECT_EQ(pprof.error, "");
    std::map<std::string, uint64_t> expected;
    for (const auto& [stack, count] : stacks) expected[PprofViewOfCollapsedStack(stack)] += count;
    EXPECT_EQ(pprof.stacks, expected);
  }
  ASSERT_FALSE(profile.lines.empty()) << "no dump in " << out_dir.path();

  const Chain deep = DeepChain();
  std::map<std::string, Tally> tallies;
  for (const auto& w : workloads) {
    if (!w->process) continue;
    Tally& t = tallies[w->name];
    const bool inlined_calls = minor[w->name] >= 311;
    for (const CollapsedLine& line : profile.OfPid(w->pid)) {
      t.samples += line.count;
      if (std::any_of(line.frames.begin(), line.frames.end(), [](const std::string& f) {
            return f.rfind(ebpf::pyperf::kNativeStackErrorOpen, 0) == 0;
          })) {
        t.native_errors += line.count;
        if (t.native_error_example.empty()) t.native_error_example = line.text;
      }
      // A thread starting or ending (no frame of the workload yet or any more).
      const auto python = PythonFramesOf(line);
      if (std::none_of(python.begin(), python.end(),
                       [&](const PythonFrame& f) { return f.file == w->script; }))
        continue;
      std::string problem;
      if (line.comm == deep.comm) {
        t.deep_samples += line.count;
        bool ended = std::any_of(line.frames.begin(), line.frames.end(), [](const auto& f) {
          return IsMarker(f, ebpf::pyperf::kNativeStackCopyEnded);
        });
        if (ended) t.copy_ended += line.count;
        problem = CheckChainSample(line, deep, w->script, inlined_calls, HasMarker(line));
      } else if (line.comm == "i_cut") {
        t.cut_samples += line.count;
        problem = CheckCutSample(line, w->script);
        if (problem.empty()) {
          t.unpaired += line.count;
        } else if (HasMarker(line) &&
                   CheckChainSample(line, CutChain(), w->script, inlined_calls, true).empty()) {
          // Before 3.11 a stack whose unwind ended early cannot tell.
          problem = "";
        }
      } else {
        auto chain = std::find_if(ExactChains().begin(), ExactChains().end(),
                                  [&](const Chain& c) { return c.comm == line.comm; });
        if (chain == ExactChains().end()) continue;  // the main thread, waiting
        t.chain_samples += line.count;
        // Marked samples (a call being entered or left as the sample was
        // taken, an unwind that failed) are not exact, but every frame they
        // show must be in order.
        const bool marked = HasMarker(line);
        problem = CheckChainSample(line, *chain, w->script, inlined_calls, marked);
        (marked ? t.marked : t.exact) += line.count;
        if (marked) {
          t.markers[FramesOfKind(line, FrameKind::kError).front()] += line.count;
          t.marked_examples.emplace(FramesOfKind(line, FrameKind::kError).front(), line.text);
        }
      }
      if (!problem.empty() && t.problems.size() < 3)
        t.problems.push_back(problem + "\n      in: " + line.text);
    }
  }

  std::printf("[ table    ] %-28s %8s %8s %8s %10s %10s %12s\n", "version", "chains", "exact %",
              "marked", "copy ended", "unpaired", "unw err");
  for (const auto& w : workloads) {
    if (!w->process) continue;
    const Tally& t = tallies[w->name];
    const double exact = t.chain_samples ? 100.0 * t.exact / t.chain_samples : 0;
    std::printf("[ table    ] %-28s %8llu %8.1f %8llu %5llu/%-4llu %5llu/%-4llu %5llu/%-6llu\n",
                w->name.c_str(), (unsigned long long)t.chain_samples, exact,
                (unsigned long long)t.marked, (unsigned long long)t.copy_ended,
                (unsigned long long)t.deep_samples, (unsigned long long)t.unpaired,
                (unsigned long long)t.cut_samples, (unsigned long long)t.native_errors,
                (unsigned long long)t.samples);
    if (!t.native_error_example.empty())
      std::printf("[ table    ]     unwind error, e.g.: %s\n", t.native_error_example.c_str());
    SCOPED_TRACE(w->name);
    for (const auto& problem : t.problems) ADD_FAILURE() << problem;
    EXPECT_GE(t.chain_samples, kMinChainSamples);
    for (const auto& [marker, count] : t.markers)
      std::printf("[ table    ]     marked %llu: %s\n", (unsigned long long)count, marker.c_str());
    std::string examples;
    for (const auto& [marker, example] : t.marked_examples) examples += "\n  " + example;
    EXPECT_GE(exact, kMinExactPercent) << "marked samples:" << examples;
    EXPECT_GT(t.deep_samples, 0u);
    EXPECT_GE(100.0 * t.copy_ended, kMinCopyEndedPercent * t.deep_samples);
    EXPECT_GT(t.cut_samples, 0u);
    EXPECT_GE(100.0 * t.unpaired, kMinUnpairedPercent * t.cut_samples);
  }
}

}  // namespace
}  // namespace pyperf_test
