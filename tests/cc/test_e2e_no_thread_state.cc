// End-to-end test of the dump line's "no thread state" counter (issue 10):
// a Python process with a thread started in C, which never enters Python and
// so has no PyThreadState, is profiled by the built PyPerf; each sample of
// that thread, and only those, is counted. (That a pure-Python process counts
// none is checked in test_e2e_kernel_offsets.cc, with the right offsets.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "support/collapsed.h"
#include "support/e2e.h"
#include "support/test_support.h"

namespace pyperf_test {
namespace {

constexpr int kFrequencyHz = 199;
constexpr int kProfileSeconds = 2;

bool HasPythonFrame(const CollapsedLine& line) {
  return !FramesOfKind(line, FrameKind::kPython).empty();
}

std::vector<CollapsedLine> LinesWhere(const std::vector<CollapsedLine>& lines,
                                      const std::function<bool(const CollapsedLine&)>& pred) {
  std::vector<CollapsedLine> out;
  for (const auto& line : lines)
    if (pred(line)) out.push_back(line);
  return out;
}

// Builds native_thread_spin.cc into `dir`; "" (with a failure) if g++ fails.
std::string BuildNativeThreadLibrary(const TempDir& dir) {
  std::string compiler = FindInPath("g++");
  if (compiler.empty()) {
    ADD_FAILURE() << "g++ is not installed";
    return "";
  }
  const std::string library = dir.File("libpyperf_e2e_native_thread.so");
  CommandResult built =
      RunCommand({compiler, "-std=c++17", "-O2", "-fPIC", "-shared", "-pthread", "-Wall", "-Wextra",
                  "-Werror", "-o", library, WorkloadPath("native_thread_spin.cc")},
                 seconds(120));
  if (built.exit_code != 0) {
    ADD_FAILURE() << "g++ failed:\n" << built.err;
    return "";
  }
  return library;
}

// The tid a native_thread_spin.py workload printed; 0 (with a failure) if none.
pid_t NativeTid(const ChildProcess& workload) {
  std::smatch m;
  const std::string out = workload.Stdout();
  if (!std::regex_search(out, m, std::regex("native-tid (\\d+)"))) {
    ADD_FAILURE() << "no native-tid line: " << out;
    return 0;
  }
  return static_cast<pid_t>(std::stol(m[1].str()));
}

// A tracked Python process with a thread that has no PyThreadState: its
// samples are counted under "no thread state", exactly as many as its lines
// hold, and none of the Python thread's.
TEST(NoThreadStateCounter, CountsTheSamplesOfANativeThread) {
  auto python = AnyInterpreter();
  PYPERF_REQUIRE_PYTHON_AND_BPF(python, "no Python interpreter installed");
  TempDir dir;  // outlives the workload that maps the library
  const std::string library = BuildNativeThreadLibrary(dir);
  ASSERT_FALSE(library.empty());

  auto workload = StartWorkload(*python, "native_thread_spin.py", {library});
  ASSERT_NE(workload, nullptr);
  const pid_t pid = workload->pid();
  const pid_t native_tid = NativeTid(*workload);
  ASSERT_NE(native_tid, 0);
  ASSERT_NE(native_tid, pid);

  auto pyperf = StartPyPerf({"-F", std::to_string(kFrequencyHz), "-d",
                             std::to_string(kProfileSeconds), "-p", std::to_string(pid)});
  PyPerfRun run = FinishPyPerf(*pyperf, "PyPerf", kPyPerfTimeout);
  auto counted = DumpCounter(run.stderr_text, "no thread state");
  ASSERT_TRUE(counted.has_value()) << "no \"no thread state\" on the dump line:\n"
                                   << run.stderr_text;

  auto native_lines = run.profile.OfTid(native_tid);
  auto python_lines = run.profile.OfTid(pid);
  uint64_t native_samples = SumCounts(native_lines);
  uint64_t python_samples = SumCounts(python_lines);
  auto with_python = LinesWhere(native_lines, HasPythonFrame);
  EXPECT_TRUE(with_python.empty()) << "Python frames in the native thread:" << Excerpt(with_python);
  auto without_python =
      LinesWhere(python_lines, [](const CollapsedLine& l) { return !HasPythonFrame(l); });
  EXPECT_TRUE(without_python.empty())
      << "the Python thread has samples without Python frames:" << Excerpt(without_python);

  // Each sample of the native thread, and only those, is counted.
  EXPECT_GT(*counted, 0u);
  EXPECT_EQ(*counted, native_samples)
      << "native thread: " << native_samples << " samples, Python thread: " << python_samples;
  // Both threads spin without ever blocking (the native one never takes the
  // GIL), so they get about the same CPU time and samples; a quarter leaves
  // room for an uneven host.
  EXPECT_GE(4 * *counted, native_samples + python_samples)
      << "native thread: " << native_samples << " samples, Python thread: " << python_samples;
  std::cout << "[ e2e ] no thread state: " << *counted << " of " << run.profile.TotalSamples()
            << " samples (native thread " << native_samples << ", Python thread " << python_samples
            << ")\n";
}

// A C thread that keeps entering Python through a ctypes callback: CPython
// creates a PyThreadState for each call and deletes it after, while the
// thread (and its tid and pthread_self) lives on. PyPerf caches a thread's
// state by tid; between the calls that state is freed memory, and its
// samples there must show no Python frames at all, never the last call's.
TEST(NoThreadStateCounter, AThreadThatLeftPythonShowsNoStaleFrames) {
  PYPERF_REQUIRE_BPF();
  TempDir dir;
  const std::string library = BuildNativeThreadLibrary(dir);
  ASSERT_FALSE(library.empty());
  struct Target {
    std::string name;
    std::unique_ptr<ChildProcess> process;
    pid_t callback_tid = 0;
  };
  std::vector<Target> targets;
  std::vector<std::string> args = {"-F", std::to_string(kFrequencyHz), "-d", "3"};
  for (const std::string spec : {"2.7", "3.9", "3.11", "3.12", "3.13"}) {
    auto python = FindInterpreter(spec);
    if (!python) PYPERF_SKIP_OR_FAIL("no interpreter " + spec);
    auto workload = StartWorkload(*python, "native_thread_spin.py", {library, "callbacks"});
    ASSERT_NE(workload, nullptr) << spec;
    pid_t tid = NativeTid(*workload);
    ASSERT_NE(tid, 0);
    args.insert(args.end(), {"-p", std::to_string(workload->pid())});
    targets.push_back({python->name, std::move(workload), tid});
  }
  auto pyperf = StartPyPerf(args);
  PyPerfRun run = FinishPyPerf(*pyperf, "PyPerf", kPyPerfTimeout);
  for (const auto& target : targets) {
    SCOPED_TRACE(target.name);
    uint64_t in_python = 0, between = 0;
    std::vector<CollapsedLine> stale;
    for (const auto& line : run.profile.OfTid(target.callback_tid)) {
      auto native = FramesOfKind(line, FrameKind::kNative);
      bool between_calls = std::any_of(native.begin(), native.end(), [](const std::string& f) {
        return f.find("SpinBetweenCallbacks") != std::string::npos;
      });
      if (between_calls) {
        between += line.count;
        if (HasPythonFrame(line)) stale.push_back(line);
      } else if (LinesEndingWith({line}, {"callback_work"}, false).size() == 1) {
        in_python += line.count;
      }
    }
    std::cout << "[ e2e ] " << target.name << ": callback thread " << in_python
              << " samples in callback_work, " << between << " between calls (" << stale.size()
              << " lines with stale Python frames)\n";
    EXPECT_TRUE(stale.empty()) << "Python frames while the thread has no PyThreadState:"
                               << Excerpt(stale);
    EXPECT_GT(in_python, 0u);
    EXPECT_GT(between, 0u);
  }
}

}  // namespace
}  // namespace pyperf_test
