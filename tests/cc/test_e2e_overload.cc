// PyPerf under more samples than it can symbolize: busy processes on every
// core, sampled at 1000 Hz with the native cache off (every sample reads the
// process's mappings and files anew). Whatever it cannot keep up with is
// counted as lost, and SIGTERM still ends it with its final dump: the file
// holds exactly the samples the dump line counts, and the line says how many
// were lost. (How soon it ends is a figure for bench/overhead.py.)
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "support/e2e.h"
#include "support/test_support.h"

namespace pyperf_test {
namespace {

TEST(Overload, SigtermEndsWithTheFinalDumpAndCountsWhatWasLost) {
  auto python = FindInterpreter("3.11");
  PYPERF_REQUIRE_PYTHON_AND_BPF(python, "pyenv 3.11 is not installed");
  // More busy processes than cores: every CPU takes 1000 samples a second.
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  const int processes = static_cast<int>(cpus > 0 ? 2 * cpus : 4);
  std::vector<std::unique_ptr<ChildProcess>> workloads;
  std::vector<std::string> args = {"-F", "1000", "--native-cache", "off"};
  for (int i = 0; i < processes; ++i) {
    workloads.push_back(StartWorkload(*python, "native_busy_loop.py"));
    ASSERT_NE(workloads.back(), nullptr);
    args.insert(args.end(), {"-p", std::to_string(workloads.back()->pid())});
  }
  TempDir dir;
  const std::string path = dir.File("pyperf.col");
  args.insert(args.end(), {"-o", path});
  auto pyperf = StartPyPerf(args);
  ASSERT_TRUE(WaitForStderr(*pyperf, "Ready to profile", seconds(120))) << pyperf->Stderr();
  // Sampled a while: each workload has run for a second of CPU.
  for (const auto& w : workloads)
    ASSERT_TRUE(WaitForCpu(w->pid(), seconds(1), seconds(120))) << "a workload did not run";

  pyperf->Signal(SIGTERM);
  // Far beyond the 2 s PyPerf promises: this catches a stop that hangs.
  ASSERT_TRUE(pyperf->Wait(seconds(60)).has_value()) << "PyPerf did not end:\n" << pyperf->Stderr();
  EXPECT_EQ(pyperf->ExitCode(), 0) << pyperf->Stderr();

  std::vector<std::string> lines = DumpLines(*pyperf);
  ASSERT_EQ(lines.size(), 1u) << "exactly the final dump line:\n" << pyperf->Stderr();
  auto samples = DumpCounter(pyperf->Stderr(), "samples collected");
  auto lost = DumpCounter(pyperf->Stderr(), "lost");
  ASSERT_TRUE(samples.has_value() && lost.has_value()) << lines[0];
  EXPECT_GT(*samples, 0u) << lines[0];
  std::cout << "[ overload ] " << *samples << " samples, " << *lost << " lost" << std::endl;

  EXPECT_FALSE(FileExists(path)) << "the transient file was left behind";
  std::vector<std::string> files = DumpedFiles(path);
  ASSERT_EQ(files.size(), 1u) << "the final dump";
  EXPECT_EQ(DumpOutputPath(lines[0]), files[0]) << lines[0];
  CollapsedProfile profile = ParseCollapsed(ReadFile(files[0]));
  EXPECT_TRUE(profile.unparseable.empty()) << profile.unparseable.front();
  EXPECT_EQ(profile.TotalSamples(), *samples) << "the file holds what the dump line counts";
}

}  // namespace
}  // namespace pyperf_test
