// End-to-end test of the dump line's "no thread state" counter (issue 10):
// a Python process with a thread started in C, which never enters Python and
// so has no PyThreadState, is profiled by the built PyPerf; each sample of
// that thread, and only those, is counted. (That a pure-Python process counts
// none is checked in test_e2e_kernel_offsets.cc, with the right offsets.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <iostream>
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

using std::chrono::seconds;

constexpr int kFrequencyHz = 199;
constexpr int kProfileSeconds = 2;
// PyPerf's startup (BPF compile and load) plus its -d, with room for a busy machine.
constexpr auto kPyPerfTimeout = seconds(90);

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

// A tracked Python process with a thread that has no PyThreadState: its
// samples are counted under "no thread state", exactly as many as its lines
// hold, and none of the Python thread's.
TEST(NoThreadStateCounter, CountsTheSamplesOfANativeThread) {
  auto python = AnyInterpreter();
  if (!python) PYPERF_SKIP_OR_FAIL("no Python interpreter installed");
  PYPERF_REQUIRE_BPF();
  std::string compiler = FindInPath("g++");
  if (compiler.empty()) PYPERF_SKIP_OR_FAIL("g++ is not installed");
  TempDir dir;  // outlives the workload that maps the library
  const std::string library = dir.File("libpyperf_e2e_native_thread.so");
  CommandResult built =
      RunCommand({compiler, "-std=c++17", "-O2", "-fPIC", "-shared", "-pthread", "-Wall", "-Wextra",
                  "-Werror", "-o", library, WorkloadPath("native_thread_spin.cc")},
                 seconds(120));
  ASSERT_EQ(built.exit_code, 0) << "g++ failed:\n" << built.err;

  auto workload = StartWorkload(*python, "native_thread_spin.py", {library});
  ASSERT_NE(workload, nullptr);
  const pid_t pid = workload->pid();
  std::smatch m;
  const std::string out = workload->Stdout();
  ASSERT_TRUE(std::regex_search(out, m, std::regex("native-tid (\\d+)"))) << out;
  const pid_t native_tid = static_cast<pid_t>(std::stol(m[1].str()));
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

}  // namespace
}  // namespace pyperf_test
