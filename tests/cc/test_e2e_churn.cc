// End-to-end test of process churn (issue 11): 1,000 short-lived Python
// processes of several versions start and exit over 35 s while PyPerf
// profiles the whole host with native stacks and gProfiler's protocol. PyPerf
// keeps running, every dump asked for is written, and its memory, open fds,
// BPF maps and caches stay bounded: printed at the start and the end, and
// checked against bounds.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "support/collapsed.h"
#include "support/e2e.h"
#include "support/test_support.h"

namespace pyperf_test {
namespace {

constexpr int kProcesses = 1000;
constexpr int kChurnSeconds = 35;
constexpr auto kDumpEvery = seconds(5);

// PyPerf's -v 2 "tables:" line (README, "Tables and their bounds").
struct Tables {
  uint64_t py_procs = 0, thread_states = 0, tracked = 0, rejected = 0, layouts = 0;
  uint64_t line_tables = 0, line_table_bytes = 0;
  uint64_t native_names = 0, native_name_bytes = 0, native_files = 0, native_processes = 0;
};

std::optional<Tables> LastTables(const std::string& stderr_text) {
  static const std::regex line(
      R"(PyPerf: tables: py_procs (\d+) of \d+, thread_states (\d+) of \d+, tracked (\d+), )"
      R"(rejected (\d+), layouts (\d+) of \d+, line tables (\d+) \((\d+) bytes\), native names )"
      R"((\d+) \((\d+) bytes\), native files (\d+), native process states (\d+))");
  std::optional<Tables> last;
  for (std::sregex_iterator it(stderr_text.begin(), stderr_text.end(), line), end; it != end;
       ++it) {
    auto n = [&](int i) { return std::stoull((*it)[i]); };
    last = Tables{n(1), n(2), n(3), n(4), n(5), n(6), n(7), n(8), n(9), n(10), n(11)};
  }
  return last;
}

// Processes on the host now (numeric entries of /proc).
size_t LiveProcessCount() {
  size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (!name.empty() && std::all_of(name.begin(), name.end(), ::isdigit)) ++n;
  }
  return n;
}

struct Figures {
  uint64_t rss_kib = 0;
  size_t fds = 0;
  Tables tables;
};

void Print(const char* when, const Figures& f) {
  const Tables& t = f.tables;
  std::printf(
      "[ churn ] %s: RSS %llu KiB, fds %zu, py_procs %llu, thread_states %llu, tracked %llu, "
      "rejected %llu, layouts %llu, line tables %llu (%llu bytes), native names %llu (%llu "
      "bytes), native files %llu, native process states %llu\n",
      when, (unsigned long long)f.rss_kib, f.fds, (unsigned long long)t.py_procs,
      (unsigned long long)t.thread_states, (unsigned long long)t.tracked,
      (unsigned long long)t.rejected, (unsigned long long)t.layouts,
      (unsigned long long)t.line_tables, (unsigned long long)t.line_table_bytes,
      (unsigned long long)t.native_names, (unsigned long long)t.native_name_bytes,
      (unsigned long long)t.native_files, (unsigned long long)t.native_processes);
}

// A dump (checked: its file is there and every line of it reads) and the
// figures right after it.
std::optional<Figures> DumpAndMeasure(ChildProcess& pyperf, int* dumps) {
  auto line = RequestDump(pyperf, seconds(60));
  if (!line) {
    ADD_FAILURE() << "no dump line after SIGUSR2 (dump " << *dumps + 1 << ")";
    return std::nullopt;
  }
  ++*dumps;
  const std::string file = DumpOutputPath(*line);
  EXPECT_TRUE(FileExists(file)) << *line;
  CollapsedProfile profile = ParseCollapsed(ReadFile(file));
  EXPECT_TRUE(profile.unparseable.empty()) << file << ": " << profile.unparseable.front();
  Figures f;
  f.rss_kib = VmRssKiB(pyperf.pid());
  f.fds = OpenFdCount(pyperf.pid());
  auto tables = LastTables(pyperf.Stderr());
  if (!tables) {
    ADD_FAILURE() << "no tables line at -v 2";
    return std::nullopt;
  }
  f.tables = *tables;
  return f;
}

TEST(ProcessChurn, AThousandShortLivedProcessesLeavePyPerfBounded) {
  PYPERF_REQUIRE_BPF();
  std::vector<std::string> interpreters;
  for (const std::string spec : {"2.7", "3.9", "3.11", "3.12", "3.13", "/usr/bin/python3.11"}) {
    auto python = FindInterpreter(spec);
    if (!python) PYPERF_SKIP_OR_FAIL("no interpreter " + spec);
    interpreters.push_back(python->path);
  }
  auto spawner_python = FindInterpreter("3.11");
  ASSERT_TRUE(spawner_python.has_value());
  TempDir dir;
  auto pyperf =
      StartPyPerf({"-F", "99", "-o", dir.File("pyperf.col"), "-v", "2", "--update-interval", "1"});
  ASSERT_TRUE(WaitForStderr(*pyperf, "Ready to profile", seconds(90))) << pyperf->Stderr();
  int dumps = 0;
  auto start = DumpAndMeasure(*pyperf, &dumps);
  ASSERT_TRUE(start.has_value());
  Print("start", *start);

  std::vector<std::string> args = {std::to_string(kProcesses), std::to_string(kChurnSeconds)};
  args.insert(args.end(), interpreters.begin(), interpreters.end());
  auto churn = StartWorkload(*spawner_python, "process_churn.py", args);
  ASSERT_NE(churn, nullptr);
  while (churn->Running()) {
    std::this_thread::sleep_for(kDumpEvery);
    ASSERT_TRUE(pyperf->Running()) << "PyPerf ended during the churn:\n" << pyperf->Stderr();
    ASSERT_TRUE(DumpAndMeasure(*pyperf, &dumps).has_value());
  }
  EXPECT_NE(churn->Stdout().find("done " + std::to_string(kProcesses)), std::string::npos)
      << churn->Stdout();
  // Two rescans (--update-interval 1) forget the processes that exited.
  std::this_thread::sleep_for(seconds(3));
  auto end = DumpAndMeasure(*pyperf, &dumps);
  ASSERT_TRUE(end.has_value());
  Print("end", *end);

  pyperf->Signal(SIGTERM);
  PyPerfRun run = FinishPyPerf(*pyperf, "PyPerf over the churn", seconds(60));
  // Every dump asked for, and the last one, was written.
  EXPECT_EQ(DumpLines(*pyperf).size(), static_cast<size_t>(dumps) + 1);
  // Most of the children were found by a rescan and profiled.
  size_t profiled = 0;
  for (const auto& line : SplitLines(run.stderr_text))
    if (line.rfind("PyPerf: profiling pid ", 0) == 0) ++profiled;
  std::printf("[ churn ] %zu processes profiled, %d dumps\n", profiled, dumps);
  // Each child lives 1.2 s, past a rescan: most of them must have been
  // tracked and dropped, or the test did not churn PyPerf's tables.
  EXPECT_GE(profiled, static_cast<size_t>(kProcesses / 2));

  const Tables& e = end->tables;
  // The BPF map holds exactly the processes user space tracks, and nothing
  // of the churn is left once it has exited.
  EXPECT_EQ(e.py_procs, e.tracked);
  // Tracked and rejected processes are live ones (the churn's 1,000 are
  // gone; the host's own come and go, hence a little room).
  const size_t live = LiveProcessCount();
  std::printf("[ churn ] %zu processes live on the host at the end\n", live);
  EXPECT_LE(e.tracked + e.rejected, live + 16) << "exited processes still tracked or rejected";
  EXPECT_LE(e.native_processes, e.tracked + 2) << "per-process unwind states of exited processes";
  EXPECT_LE(e.layouts, 16u);
  // Memory: every cache is bounded by entries and bytes (README); what the
  // churn may add on top of the start is the steady state of those caches
  // for the files of six interpreters: well under 64 MiB.
  EXPECT_LE(end->rss_kib, start->rss_kib + 64 * 1024);
  // File descriptors: per-process ones are closed when the process goes.
  EXPECT_LE(end->fds, start->fds + 4);
}

}  // namespace
}  // namespace pyperf_test
