// End-to-end tests of the Python stacks PyPerf writes (issue 3): real
// interpreters run the workloads in tests/cc/workloads, the built PyPerf
// profiles them, and the tests read the collapsed lines as gProfiler would.
//
// calltree.py's expected frames are read from its source (the line of each
// `def`, each call site), so editing the workload does not break the tests.
// Each PyPerf start costs seconds (BPF load), so one run serves several
// assertions, and the two --line-numbers modes profile the same workload side
// by side.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "FrameSpelling.h"
#include "PyPerfBpfShared.h"
#include "support/collapsed.h"
#include "support/e2e.h"
#include "support/python_source.h"
#include "support/test_support.h"

namespace pyperf_test {
namespace {

// The interpreters the stack tests run on: "X.Y" is pyenv's X.Y.z, a path is
// that binary. Add a line to cover another one.
const std::vector<std::string> kInterpreters = {
    "3.10",                 // pyenv, libpython3.10.so
    "3.11",                 // pyenv, libpython3.11.so
    "3.12",                 // pyenv, libpython3.12.so
    "/usr/bin/python3.11",  // Debian's: non-PIE, interpreter inside the executable
};

constexpr int kFrequencyHz = 199;
// calltree's busy worker shares the GIL with three other threads; at 499 Hz it
// gets a few hundred samples in kProfileSeconds, enough for "99% of them" to
// mean something (at 100 samples a single legitimate sample in Worker.run,
// between two calls of spin, would already fail it).
constexpr int kCallTreeFrequencyHz = 499;
constexpr int kProfileSeconds = 3;
// The README's promise: a Python stack deeper than 128 frames shows its 128
// innermost ones after "[Truncated Python Stack]_[pe]".
constexpr size_t kPythonFrameLimit = 128;
// What share of a calltree thread's samples must show its expected stack.
// Each thread runs one loop forever, so the expected stack is where its time
// goes; what may differ is a sample between two calls (in main_busy, not
// main_leaf) or one with an error marker (under 1% overall, checked below).
// Measured on a loaded 2-core machine: 99.6-100%.
constexpr double kMainLeafPercent = 90.0;
constexpr double kLoopLeafPercent = 95.0;
// syscall_loop reads 1 MiB of /dev/urandom per call (about a millisecond of
// kernel time under the syscall entry, without the GIL); the rest is user
// code around the read (allocating the buffer, the libc wrapper). With
// /dev/zero it was 50-100% of 4-60 samples, too few to mean much. The share
// in the call is the machine's business and only has a floor; of the samples
// in it, nearly all must show syscall_loop above the syscall entry.
constexpr double kInSyscallPercent = 20.0;
constexpr double kSyscallChainPercent = 95.0;
// Lines of a profile a failure message shows.
constexpr size_t kExcerptLines = 8;

std::vector<std::string> ProfileArgs(const std::vector<pid_t>& pids, const std::string& line_mode,
                                     int frequency = kFrequencyHz, int duration = kProfileSeconds) {
  std::vector<std::string> args = {
      "-F", std::to_string(frequency), "-d", std::to_string(duration), "--line-numbers", line_mode};
  for (pid_t pid : pids) args.insert(args.end(), {"-p", std::to_string(pid)});
  return args;
}

// Failures recorded so far in the running test.
int FailureCount() {
  const auto* result = ::testing::UnitTest::GetInstance()->current_test_info()->result();
  int failures = 0;
  for (int i = 0; i < result->total_part_count(); ++i)
    if (result->GetTestPartResult(i).failed()) ++failures;
  return failures;
}

double Percent(uint64_t part, uint64_t whole) {
  return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

// The module of a script outside any library directory, by the README's rule
// (independent of PyPerf's PythonModuleName): the path without its leading
// '/' and ".py", each '/' a '.'.
std::string ModuleOfScript(const std::string& path) {
  std::string module = path.substr(1, path.size() - 1 - 3);
  std::replace(module.begin(), module.end(), '/', '.');
  return module;
}

// What calltree.py's frames must look like in one --line-numbers mode.
class CallTreeExpectations {
 public:
  // `module_first_line`: the module code object's first line, which depends on
  // the version (1 from 3.8; before, the last line of a leading docstring).
  CallTreeExpectations(const PythonSource& source, bool current_lines, int module_first_line)
      : source_(source),
        current_lines_(current_lines),
        module_first_line_(module_first_line),
        module_(ModuleOfScript(source.path())) {}

  const std::string& module() const { return module_; }

  // Checks one parsed frame: file, module, class, function, and its line:
  // the first line in "first" mode; in "current" mode the line of `call` in
  // the function's body if the frame is a caller, else a line of the function.
  void ExpectFrame(const PythonFrame& frame, const std::string& class_name,
                   const std::string& function, const std::string& call = "") const {
    SCOPED_TRACE("frame " + frame.qualified_name + " (" + frame.file + ":" +
                 std::to_string(frame.line) + ")");
    EXPECT_EQ(frame.file, source_.path());
    EXPECT_EQ(frame.module, module_);
    EXPECT_EQ(frame.class_name, class_name);
    EXPECT_EQ(frame.function, function);
    if (!current_lines_) {
      EXPECT_EQ(frame.line, FirstLine(function)) << "the code object's first line";
    } else if (!call.empty()) {
      EXPECT_EQ(frame.line, source_.StatementLine(function, call))
          << "the line of the call \"" << call << "\"";
    } else {
      // A frame that has just been entered reports its first line, as CPython
      // does (f_lasti -1 up to 3.10, the RESUME instruction from 3.11).
      int begin = FirstLine(function);
      int end = source_.LastLine(function);
      EXPECT_GE(frame.line, begin) << "a line of " << function << " from its first to its last";
      EXPECT_LE(frame.line, end) << "a line of " << function << " from its first to its last";
    }
  }

 private:
  int FirstLine(const std::string& function) const {
    return function == "<module>" ? module_first_line_ : source_.FirstLine(function);
  }

  const PythonSource& source_;
  bool current_lines_;
  int module_first_line_;
  std::string module_;
};

// The first line `python` gives the code object of the module at `path`.
int ModuleFirstLine(const Interpreter& python, const std::string& path) {
  CommandResult result = RunCommand(
      {python.path, "-c",
       "import sys; p = sys.argv[1]; print(compile(open(p).read(), p, 'exec').co_firstlineno)",
       path},
      seconds(30));
  int line = 0;
  if (result.exit_code != 0 || sscanf(result.out.c_str(), "%d", &line) != 1 || line < 1) {
    ADD_FAILURE() << python.name << " could not compile " << path << ":\n" << result.err;
    return 1;
  }
  return line;
}

struct CallTreeFigures {
  uint64_t samples = 0;
  uint64_t samples_with_error_marker = 0;
  std::map<std::string, uint64_t> error_markers;  // marker -> samples carrying it
  uint64_t worker_samples = 0;
  uint64_t worker_samples_in_spin = 0;
};

// All of the assertions on one PyPerf run over calltree.py.
CallTreeFigures CheckCallTree(const CollapsedProfile& profile, pid_t pid,
                              const CallTreeExpectations& expect) {
  CallTreeFigures figures;
  std::vector<CollapsedLine> lines = profile.OfPid(pid);
  EXPECT_EQ(lines.size(), profile.lines.size()) << "lines of processes other than -p " << pid;
  if (lines.empty()) {
    ADD_FAILURE() << "no samples of pid " << pid;
    return figures;
  }
  ExpectWellFormed(lines, /*every_frame_has_a_kind=*/true);
  figures.samples = SumCounts(lines);

  {
    SCOPED_TRACE("main thread: <module> -> main_busy -> main_leaf");
    auto main_lines = profile.OfTid(pid);
    auto matching = ExpectShareEndingWith(
        main_lines, {"<module>", "main_busy", "main_leaf"}, true, kMainLeafPercent,
        "of the main thread show <module> -> main_busy -> main_leaf");
    const int before = FailureCount();  // report the first wrong line only
    for (const auto& line : matching) {
      if (FailureCount() > before) break;
      auto frames = PythonFramesOf(line);
      expect.ExpectFrame(frames[0], "", "<module>", "main_busy()");
      expect.ExpectFrame(frames[1], "", "main_busy", "main_leaf()");
      expect.ExpectFrame(frames[2], "", "main_leaf");
    }
    for (const auto& line : main_lines) {
      if (FailureCount() > before) break;
      auto frames = PythonFramesOf(line);
      if (!frames.empty()) {
        EXPECT_EQ(frames.front().function, "<module>") << "the main thread's root\n  " << line.text;
      }
    }
  }

  if (auto tid = ThreadRunning(profile, pid, "run", "Worker")) {
    SCOPED_TRACE("worker-method thread: Worker.run -> Worker.spin");
    auto worker_lines = profile.OfTid(*tid);
    auto matching = LinesEndingWith(worker_lines, {"run", "spin"}, false);
    const int before = FailureCount();
    for (const auto& line : matching) {
      if (FailureCount() > before) break;
      auto frames = PythonFramesOf(line);
      size_t n = frames.size();
      expect.ExpectFrame(frames[n - 2], "Worker", "run", "self.spin()");
      expect.ExpectFrame(frames[n - 1], "Worker", "spin");
      // The thread's root: threading's bootstrap, named without lib/pythonX.Y.
      EXPECT_EQ(frames[0].module, "threading") << line.text;
      EXPECT_EQ(frames[0].class_name, "Thread") << line.text;
      EXPECT_NE(frames[0].function.find("bootstrap"), std::string::npos) << line.text;
    }
    // The "Done when": >= 99% of the busy thread's samples end in
    // its leaf (native and kernel frames below it aside).
    std::vector<CollapsedLine> other_leaves;
    for (const auto& line : worker_lines) {
      figures.worker_samples += line.count;
      auto leaf = LeafIgnoringNativeAndKernel(line);
      if (leaf && IsPythonFunction(*leaf, "spin", "Worker")) {
        figures.worker_samples_in_spin += line.count;
      } else {
        other_leaves.push_back(line);
      }
    }
    EXPECT_GE(Percent(figures.worker_samples_in_spin, figures.worker_samples), 99.0)
        << figures.worker_samples_in_spin << " of " << figures.worker_samples
        << " samples end in Worker.spin; the others:" << Excerpt(other_leaves, kExcerptLines);
  }

  if (auto tid = ThreadRunning(profile, pid, "class_spin", std::nullopt)) {
    SCOPED_TRACE("worker-cls thread: Worker.class_spin");
    auto cls_lines = profile.OfTid(*tid);
    auto matching = ExpectShareEndingWith(cls_lines, {"class_spin"}, false, kLoopLeafPercent,
                                          "of the worker-cls thread end in Worker.class_spin");
    const int before = FailureCount();
    for (const auto& line : matching) {
      if (FailureCount() > before) break;
      expect.ExpectFrame(PythonFramesOf(line).back(), "Worker", "class_spin");
    }
  }

  if (auto tid = ThreadRunning(profile, pid, "syscall_loop", "")) {
    SCOPED_TRACE("syscall-loop thread: kernel frames with the syscall entry");
    auto syscall_lines = profile.OfTid(*tid);
    ExpectSystemCallSamples(
        syscall_lines,
        [](const CollapsedLine& line) {
          return FindInOrder(line.frames, {[](const std::string& f) {
                                             return IsPythonFunction(f, "syscall_loop");
                                           },
                                           IsSyscallEntryFrame})
              .has_value();
        },
        kInSyscallPercent, kSyscallChainPercent,
        "of the syscall-loop thread show syscall_loop then entry_SYSCALL*/do_syscall_64 _[k]");
    const int before = FailureCount();
    for (const auto& line : LinesEndingWith(syscall_lines, {"syscall_loop"}, false)) {
      if (FailureCount() > before) break;
      expect.ExpectFrame(PythonFramesOf(line).back(), "", "syscall_loop");
    }
  }

  if (auto tid = ThreadRunning(profile, pid, "recurse", "")) {
    SCOPED_TRACE("deep-recursion thread: truncated stacks of exactly 128 Python frames");
    auto deep_lines = profile.OfTid(*tid);
    const int before = FailureCount();
    for (const auto& line : deep_lines) {
      if (FailureCount() > before) break;
      EXPECT_TRUE(IsTruncated(line)) << "a stack deeper than the limit without the marker "
                                        "right after the first token:\n  "
                                     << line.text;
      auto frames = PythonFramesOf(line);
      EXPECT_EQ(FramesOfKind(line, FrameKind::kPython).size(), kPythonFrameLimit)
          << "Python frames shown of a truncated stack\n  " << line.text;
      EXPECT_EQ(frames.size(), kPythonFrameLimit) << "well-spelled Python frames\n  " << line.text;
      if (frames.empty()) continue;
      // The walk starts at the innermost frame, so the outermost ones are cut.
      EXPECT_EQ(frames.back().function, "deep_leaf") << line.text;
      for (size_t i = 0; i + 1 < frames.size(); ++i) {
        if (frames[i].function != "recurse") {
          ADD_FAILURE() << "frame " << i << " is " << frames[i].qualified_name
                        << ", not recurse\n  " << line.text;
          break;
        }
      }
    }
    for (const auto& line : lines) {
      if (FailureCount() > before) break;
      if (line.tid != *tid) {
        EXPECT_FALSE(IsTruncated(line)) << "a shallow stack marked truncated:\n  " << line.text;
      }
    }
  }

  std::vector<CollapsedLine> with_errors;
  for (const auto& line : lines) {
    auto markers = ErrorMarkers(line);
    if (markers.empty()) continue;
    for (const auto& marker : markers) figures.error_markers[marker] += line.count;
    figures.samples_with_error_marker += line.count;
    with_errors.push_back(line);
  }
  EXPECT_LT(Percent(figures.samples_with_error_marker, figures.samples), 1.0)
      << figures.samples_with_error_marker << " of " << figures.samples
      << " samples carry an error marker:" << Excerpt(with_errors, kExcerptLines);
  return figures;
}

class PythonStacksTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    interpreter_ = FindInterpreter(GetParam());
    PYPERF_REQUIRE_PYTHON_AND_BPF(interpreter_, "interpreter " + GetParam() + " is not installed");
  }
  std::optional<Interpreter> interpreter_;
};

// calltree.py profiled with --line-numbers first and current at once: every
// thread's frames, the busy thread's leaf, kernel frames, truncation, and the
// share of samples with an error marker.
TEST_P(PythonStacksTest, CallTreeFramesAreCorrectInBothLineModes) {
  PythonSource source(WorkloadPath("calltree.py"));
  ASSERT_FALSE(source.empty()) << "cannot read " << source.path();
  const int module_first_line = ModuleFirstLine(*interpreter_, source.path());
  auto workload = StartWorkload(*interpreter_, "calltree.py");
  ASSERT_NE(workload, nullptr);
  auto first = StartPyPerf(ProfileArgs({workload->pid()}, "first", kCallTreeFrequencyHz));
  auto current = StartPyPerf(ProfileArgs({workload->pid()}, "current", kCallTreeFrequencyHz));
  CollapsedProfile first_profile =
      FinishPyPerf(*first, "--line-numbers first", kPyPerfTimeout).profile;
  CollapsedProfile current_profile =
      FinishPyPerf(*current, "--line-numbers current", kPyPerfTimeout).profile;
  ASSERT_TRUE(workload->Running()) << "the workload died; stderr:\n" << workload->Stderr();

  for (bool current_lines : {false, true}) {
    const char* mode = current_lines ? "current" : "first";
    SCOPED_TRACE(std::string("--line-numbers ") + mode);
    int failures_before = FailureCount();
    CallTreeExpectations expect(source, current_lines, module_first_line);
    const std::string tail = ".tests.cc.workloads.calltree";
    ASSERT_EQ(expect.module().rfind(tail), expect.module().size() - tail.size()) << expect.module();
    CallTreeFigures figures =
        CheckCallTree(current_lines ? current_profile : first_profile, workload->pid(), expect);

    double error_percent = Percent(figures.samples_with_error_marker, figures.samples);
    double leaf_percent = Percent(figures.worker_samples_in_spin, figures.worker_samples);
    std::string key = std::string("_") + mode;
    RecordProperty("interpreter", interpreter_->name);
    RecordProperty("samples" + key, std::to_string(figures.samples));
    RecordProperty("error_marker_percent" + key, std::to_string(error_percent));
    RecordProperty("busy_thread_leaf_percent" + key, std::to_string(leaf_percent));
    char row[256];
    snprintf(row, sizeof(row),
             "[ e2e ] %s --line-numbers %s: %llu samples, %.2f%% with an error marker, busy "
             "thread %.2f%% in Worker.spin (%llu/%llu), frames %s",
             interpreter_->name.c_str(), mode, (unsigned long long)figures.samples, error_percent,
             leaf_percent, (unsigned long long)figures.worker_samples_in_spin,
             (unsigned long long)figures.worker_samples,
             FailureCount() > failures_before ? "WRONG (see failures)" : "correct");
    std::cout << row;
    for (const auto& [marker, count] : figures.error_markers)
      std::cout << "; " << marker << " x" << count;
    std::cout << std::endl;
  }
}

// 300 sleeping threads started after a busy one put it deepest in CPython's
// thread list; it and the main thread must still be found.
TEST_P(PythonStacksTest, FindsThreadsAmong300) {
  auto workload = StartWorkload(*interpreter_, "many_threads.py", {}, {{"THREADS", "300"}});
  ASSERT_NE(workload, nullptr);
  auto pyperf = StartPyPerf(ProfileArgs({workload->pid()}, "first"));
  CollapsedProfile profile = FinishPyPerf(*pyperf, "PyPerf", kPyPerfTimeout).profile;
  auto lines = profile.OfPid(workload->pid());
  ASSERT_FALSE(lines.empty()) << "no samples of pid " << workload->pid();
  ExpectWellFormed(lines, /*every_frame_has_a_kind=*/true);

  auto busy_first = ThreadRunning(profile, workload->pid(), "busy_first_thread", "");
  EXPECT_TRUE(busy_first.has_value());
  if (busy_first) {
    EXPECT_NE(*busy_first, workload->pid()) << "busy_first_thread runs on the main thread?";
  }
  // Both busy threads loop in one function: every sample of theirs is in it.
  if (busy_first) {
    ExpectShareOfSamples(profile.OfTid(*busy_first),
                         PythonStackEndsWith({"busy_first_thread"}, false), kLoopLeafPercent,
                         "of the busy-first thread end in busy_first_thread");
  }
  ExpectShareOfSamples(profile.OfTid(workload->pid()),
                       PythonStackEndsWith({"<module>", "main_spin"}, true), kLoopLeafPercent,
                       "of the main thread show <module> -> main_spin");
  std::vector<CollapsedLine> thread_state_errors;
  for (const auto& line : lines) {
    const auto& f = line.frames;
    if (std::find(f.begin(), f.end(), ebpf::pyperf::SampleErrorFrame(PYPERF_ERROR_THREAD_STATE)) !=
        f.end())
      thread_state_errors.push_back(line);
  }
  EXPECT_TRUE(thread_state_errors.empty())
      << SumCounts(thread_state_errors) << " of " << SumCounts(lines)
      << " samples could not find their thread state:"
      << Excerpt(thread_state_errors, kExcerptLines);
}

INSTANTIATE_TEST_SUITE_P(Interpreters, PythonStacksTest, ::testing::ValuesIn(kInterpreters),
                         [](const auto& info) { return SpecTestName(info.param); });

// -p (repeated) profiles the processes named and no other.
TEST(PythonStacksFiltering, ProfilesOnlyTheProcessesGivenWithP) {
  auto python = AnyInterpreter();
  PYPERF_REQUIRE_PYTHON_AND_BPF(python, "no Python interpreter installed");
  auto a = StartWorkload(*python, "calltree.py");
  auto b = StartWorkload(*python, "calltree.py");
  auto other = StartWorkload(*python, "calltree.py");
  ASSERT_TRUE(a && b && other);
  auto pyperf = StartPyPerf(ProfileArgs({a->pid(), b->pid()}, "first"));
  CollapsedProfile profile = FinishPyPerf(*pyperf, "PyPerf -p A -p B", kPyPerfTimeout).profile;
  EXPECT_FALSE(profile.OfPid(a->pid()).empty()) << "no samples of the first -p";
  EXPECT_FALSE(profile.OfPid(b->pid()).empty()) << "no samples of the second -p";
  auto others = profile.OfPid(other->pid());
  EXPECT_TRUE(others.empty()) << "a process not given with -p:" << Excerpt(others, kExcerptLines);
  std::vector<CollapsedLine> unexpected;
  for (const auto& line : profile.lines)
    if (line.pid != a->pid() && line.pid != b->pid()) unexpected.push_back(line);
  EXPECT_TRUE(unexpected.empty()) << "lines of pids not given with -p:"
                                  << Excerpt(unexpected, kExcerptLines);
}

// Without -p, a Python process started after PyPerf is picked up by the next
// --update-interval rescan.
TEST(PythonStacksDiscovery, ProfilesAProcessStartedAfterPyPerf) {
  auto python = AnyInterpreter();
  PYPERF_REQUIRE_PYTHON_AND_BPF(python, "no Python interpreter installed");
  auto pyperf =
      StartPyPerf({"-v", "1", "-F", std::to_string(kFrequencyHz), "--update-interval", "1"});
  ASSERT_TRUE(WaitForStderr(*pyperf, "Ready to profile", kPyPerfTimeout) || !pyperf->Running())
      << "stderr:\n"
      << pyperf->Stderr();
  ASSERT_TRUE(pyperf->Running()) << "stderr:\n" << pyperf->Stderr();
  auto workload = StartWorkload(*python, "calltree.py");
  ASSERT_NE(workload, nullptr);
  // PyPerf's own word that a rescan found it, then a second of the
  // workload's CPU time to sample (however busy the machine is).
  ASSERT_TRUE(
      WaitForStderr(*pyperf, "profiling pid " + std::to_string(workload->pid()) + " ", seconds(60)))
      << "the workload was not picked up; stderr:\n"
      << pyperf->Stderr();
  const auto picked_up = CpuTicks(workload->pid());
  WaitFor(
      [&] {
        return CpuTicks(workload->pid()) - picked_up >=
               static_cast<unsigned long long>(sysconf(_SC_CLK_TCK));
      },
      seconds(60));
  pyperf->Signal(SIGTERM);
  CollapsedProfile profile =
      FinishPyPerf(*pyperf, "PyPerf, no -p, --update-interval 1", kPyPerfTimeout).profile;
  auto lines = profile.OfPid(workload->pid());
  ASSERT_FALSE(lines.empty()) << "no samples of pid " << workload->pid() << " started 2 s after "
                              << "PyPerf; pids seen: " << [&] {
                                   std::string pids;
                                   for (const auto& l : profile.lines)
                                     pids += " " + std::to_string(l.pid);
                                   return pids.substr(0, 400);
                                 }();
  ExpectWellFormed(lines, /*every_frame_has_a_kind=*/true);
  ExpectShareOfSamples(profile.OfTid(workload->pid()),
                       PythonStackEndsWith({"<module>", "main_busy", "main_leaf"}, true),
                       kMainLeafPercent,
                       "of the main thread show <module> -> main_busy -> main_leaf");
}

}  // namespace
}  // namespace pyperf_test
