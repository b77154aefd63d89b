// What PyPerf prints on stderr at each -v level, and signals that arrive
// before it is ready:
//  - -v 0 prints only "Ready to profile", the dump line and warnings/errors;
//    each level adds exactly its own kinds of lines (README, "Command line").
//  - SIGTERM while the BPF program loads: PyPerf exits 0 without sampling,
//    with its (empty) last dump, and never prints "Ready to profile".
//  - SIGUSR2 while it loads: no crash, no dump for an interval that had not
//    begun; the protocol works once ready.
// Signals are sent once /proc/PID/status shows PyPerf catches them, so the
// test never races the installation of its handlers.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "support/e2e.h"
#include "support/test_support.h"

namespace pyperf_test {
namespace {

// The -v level a stderr line belongs to (README), or -1 for a line that no
// level may print.
int LevelOf(const std::string& line) {
  auto starts = [&](const char* prefix) { return line.rfind(prefix, 0) == 0; };
  if (line == "Ready to profile") return 0;
  if (starts("PyPerf: samples collected: ")) return 0;
  if (starts("PyPerf: warning: ") || starts("PyPerf: error: ")) return 0;
  if (starts("PyPerf: profiling pid ")) return 1;
  if (starts("PyPerf: pid ") && line.size() > 7 && line.compare(line.size() - 7, 7, " exited") == 0)
    return 1;
  if (starts("PyPerf: task_struct offsets: ") || starts("PyPerf: kernel offsets ") ||
      starts("PyPerf: symbols: in map ") || starts("PyPerf: tables: ") ||
      starts("PyPerf: released "))
    return 2;
  if (starts("PyPerf: round ")) return 3;
  if (starts("PyPerf: rescan: ")) return 4;
  if (starts("PyPerf: pid ") && line.find(" is not profiled: ") != std::string::npos) return 4;
  return -1;
}

class Verbosity : public PythonWorkloadTest {
 protected:
  Verbosity() : PythonWorkloadTest("native_busy_loop.py", "3.11") {}
};

TEST_F(Verbosity, EachLevelPrintsExactlyItsKindsOfLines) {
  std::string pid = std::to_string(workload_->pid());
  // All five levels at once: one BPF load's wait instead of five.
  std::vector<std::unique_ptr<ChildProcess>> runs;
  for (int level = 0; level <= 4; ++level)
    runs.push_back(StartPyPerf({"-v", std::to_string(level), "-F", "99", "-d", "2", "-p", pid}));
  for (int level = 0; level <= 4; ++level) {
    SCOPED_TRACE("-v " + std::to_string(level));
    PyPerfRun run = FinishPyPerf(*runs[level], "PyPerf", seconds(180));
    std::map<int, int> seen;
    for (const auto& line : SplitLines(run.stderr_text)) {
      if (line.empty()) continue;
      int of = LevelOf(line);
      EXPECT_NE(of, -1) << "a line no level prints: " << line;
      EXPECT_LE(of, level) << "printed at -v " << level << ": " << line;
      ++seen[of];
    }
    EXPECT_EQ(std::count(run.stderr_text.begin(), run.stderr_text.end(), '\n'),
              seen[-1] + seen[0] + seen[1] + seen[2] + seen[3] + seen[4]);
    // Every level up to this one shows up: a run of 2 s has a process, the
    // kernel offsets, rounds and a rescan to tell of.
    for (int k = 0; k <= level; ++k) EXPECT_GT(seen[k], 0) << "no line of level " << k;
    auto lines = SplitLines(run.stderr_text);
    EXPECT_EQ(std::count(lines.begin(), lines.end(), "Ready to profile"), 1) << run.stderr_text;
    if (level == 0) {
      EXPECT_EQ(lines.front(), "Ready to profile") << run.stderr_text;
    }
  }
}

// True once /proc/PID/status lists `sig` among the signals `pid` catches.
bool Catches(pid_t pid, int sig) {
  std::string status = ReadFile("/proc/" + std::to_string(pid) + "/status");
  size_t at = status.find("SigCgt:\t");
  if (at == std::string::npos) return false;
  unsigned long long mask = std::strtoull(status.c_str() + at + 8, nullptr, 16);
  return (mask >> (sig - 1)) & 1;
}

std::vector<std::string> DumpFiles(const TempDir& dir) {
  std::vector<std::string> files;
  for (const auto& name : SplitLines(RunCommand({"ls", "-1", dir.path()}).out))
    if (name.rfind("pyperf.col.", 0) == 0) files.push_back(dir.File(name));
  std::sort(files.begin(), files.end());
  return files;
}

TEST(EarlySignals, SigtermWhileLoadingExitsZeroWithoutSampling) {
  PYPERF_REQUIRE_BPF();
  TempDir dir;
  auto pyperf = StartPyPerf({"-F", "99", "-o", dir.File("pyperf.col")});
  ASSERT_TRUE(
      WaitFor([&] { return Catches(pyperf->pid(), SIGTERM) || !pyperf->Running(); }, seconds(60)));
  ASSERT_FALSE(FileExists(dir.File("pyperf.col"))) << "already ready: the test came too late";
  pyperf->Signal(SIGTERM);
  ASSERT_TRUE(pyperf->Wait(seconds(120)).has_value()) << pyperf->Stderr();
  EXPECT_EQ(pyperf->ExitCode(), 0) << pyperf->Stderr();
  EXPECT_EQ(pyperf->Stderr().find("Ready to profile"), std::string::npos) << pyperf->Stderr();
  EXPECT_NE(pyperf->Stderr().find("samples collected: 0,"), std::string::npos) << pyperf->Stderr();
  EXPECT_FALSE(FileExists(dir.File("pyperf.col"))) << "the transient file was left behind";
  auto files = DumpFiles(dir);
  ASSERT_EQ(files.size(), 1u) << "the last dump";
  EXPECT_EQ(ReadFile(files[0]), "");
}

TEST(EarlySignals, SigusrWhileLoadingIsNotADumpAndTheProtocolWorksAfter) {
  auto python = FindInterpreter("3.11");
  PYPERF_REQUIRE_PYTHON_AND_BPF(python, "pyenv 3.11 is not installed");
  auto workload = StartWorkload(*python, "native_busy_loop.py");
  ASSERT_NE(workload, nullptr);
  TempDir dir;
  const std::string path = dir.File("pyperf.col");
  // -v 3: a "round" line (once a second at most) tells the test that PyPerf
  // has been through its loop, where a pending dump would be written.
  auto pyperf =
      StartPyPerf({"-v", "3", "-F", "99", "-o", path, "-p", std::to_string(workload->pid())});
  ASSERT_TRUE(
      WaitFor([&] { return Catches(pyperf->pid(), SIGUSR2) || !pyperf->Running(); }, seconds(60)));
  ASSERT_FALSE(FileExists(path)) << "already ready: the test came too late";
  for (int i = 0; i < 3; ++i) pyperf->Signal(SIGUSR2);
  ASSERT_TRUE(pyperf->Running()) << pyperf->Stderr();
  ASSERT_TRUE(WaitFor([&] { return FileExists(path) || !pyperf->Running(); }, seconds(120)) &&
              pyperf->Running())
      << pyperf->Stderr();
  // Ready: samples flow; two rounds later the early signals made no dump.
  auto rounds = [&] {
    std::string err = pyperf->Stderr();
    size_t n = 0;
    for (size_t at = err.find("Ready to profile");
         at != std::string::npos && (at = err.find("PyPerf: round ", at + 1)) != std::string::npos;)
      ++n;
    return n;
  };
  ASSERT_TRUE(WaitFor([&] { return rounds() >= 2 || !pyperf->Running(); }, seconds(60)))
      << pyperf->Stderr();
  ASSERT_TRUE(DumpFiles(dir).empty()) << "a dump nobody asked for once ready";
  pyperf->Signal(SIGUSR2);
  ASSERT_TRUE(WaitFor([&] { return DumpFiles(dir).size() == 1; }, seconds(10))) << pyperf->Stderr();
  pyperf->Signal(SIGTERM);
  ASSERT_TRUE(pyperf->Wait(seconds(60)).has_value());
  EXPECT_EQ(pyperf->ExitCode(), 0) << pyperf->Stderr();
  auto files = DumpFiles(dir);
  ASSERT_EQ(files.size(), 2u);
  CollapsedProfile first = ParseCollapsed(ReadFile(files[0]));
  EXPECT_GT(SumCounts(first.OfPid(workload->pid())), 0u) << "the first dump holds no samples";
}

}  // namespace
}  // namespace pyperf_test
