// No system call per sample in the steady state (issue 14): PyPerf reads its
// perf rings from memory and wakes a bounded number of times a second, so
// the system calls it makes while sampling two busy Python processes at
// -F 999 (counted by `strace -c -f -p`) stay far below the samples it takes.
// The window is measured in the workloads' CPU time, not wall time. What
// PyPerf does per second, whatever the rate (a 100 ms round's epoll_wait and
// map reads), is allowed kFixedCallsPerSecond of wall time: on a busy host
// the window lasts longer and those calls grow with it, not with the
// samples. What grows with the samples (a wake-up per half ring) must stay
// under a tenth of them. A reader with a system call per read, waking every
// few events, makes about one system call per three samples, and fails.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <iostream>
#include <optional>
#include <regex>
#include <string>

#include "support/e2e.h"
#include "support/test_support.h"

namespace pyperf_test {
namespace {

// Ten rounds a second, each an epoll_wait and a few map reads, and the
// kernel stacks map emptied once a second; with room to spare.
constexpr double kFixedCallsPerSecond = 40;

// The total of `strace -c`'s table: "100.00  0.009039  7  1243  80 total".
std::optional<uint64_t> StraceTotalCalls(const std::string& summary) {
  static const std::regex total(R"(^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(\d+\s+)?total\s*$)");
  for (const auto& line : SplitLines(summary)) {
    std::smatch m;
    if (std::regex_match(line, m, total)) return std::stoull(m[1].str());
  }
  return std::nullopt;
}

TEST(SystemCalls, SteadyStateMakesFarFewerSystemCallsThanSamples) {
  auto python = AnyInterpreter();
  if (!python) PYPERF_SKIP_OR_FAIL("no Python interpreter to profile");
  PYPERF_REQUIRE_BPF();
  const std::string strace = FindInPath("strace");
  if (strace.empty()) PYPERF_SKIP_OR_FAIL("strace is not installed (scripts/setup.sh installs it)");

  ChildProcess busy1({python->path, "-c", "while 1: pass"});
  ChildProcess busy2({python->path, "-c", "while 1: pass"});
  // No rescans in the window (they read /proc, whatever the rate).
  auto pyperf = StartPyPerf({"-F", "999", "--update-interval", "3600", "-p",
                             std::to_string(busy1.pid()), "-p", std::to_string(busy2.pid())});
  ASSERT_TRUE(WaitForStderr(*pyperf, "Ready to profile", seconds(120))) << pyperf->Stderr();
  // Past start-up and the first rounds; the dump is outside the window.
  ASSERT_TRUE(WaitForCpu(busy1.pid(), milliseconds(300)));
  ASSERT_TRUE(RequestDump(*pyperf, seconds(30)).has_value()) << pyperf->Stderr();

  TempDir dir;
  const std::string summary_path = dir.File("strace-c.txt");
  ChildProcess traced(
      {strace, "-c", "-f", "-o", summary_path, "-p", std::to_string(pyperf->pid())});
  WaitFor(
      [&] { return traced.Stderr().find("attached") != std::string::npos || !traced.Running(); },
      seconds(10));
  ASSERT_TRUE(traced.Running()) << traced.Stderr();
  const auto start = std::chrono::steady_clock::now();
  // 2 s of CPU each: about 4000 samples at 999 Hz.
  EXPECT_TRUE(WaitForCpu(busy1.pid(), seconds(2)));
  EXPECT_TRUE(WaitForCpu(busy2.pid(), seconds(2)));
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  traced.Signal(SIGINT);  // strace detaches and writes its table
  ASSERT_TRUE(traced.Wait(seconds(30)).has_value());
  auto dump = RequestDump(*pyperf, seconds(30));
  ASSERT_TRUE(dump.has_value()) << pyperf->Stderr();
  pyperf->Signal(SIGTERM);
  ASSERT_TRUE(pyperf->Wait(seconds(60)).has_value());

  const std::string summary = ReadFile(summary_path);
  auto calls = StraceTotalCalls(summary);
  ASSERT_TRUE(calls.has_value()) << "no total in strace -c's table:\n"
                                 << summary << traced.Stderr();
  auto samples = DumpCounter(*dump, "samples collected");
  ASSERT_TRUE(samples.has_value()) << *dump;
  std::cout << "[ e2e ] " << *samples << " samples, " << *calls << " system calls in " << wall
            << " s:\n"
            << summary << std::endl;
  ASSERT_GE(*samples, 1000u) << "too few samples to judge: " << *dump;
  const double bound = static_cast<double>(*samples) / 10 + kFixedCallsPerSecond * wall;
  EXPECT_LT(static_cast<double>(*calls), bound)
      << "system calls grow with the samples (" << *samples << " samples in " << wall << " s)";
}

}  // namespace
}  // namespace pyperf_test
