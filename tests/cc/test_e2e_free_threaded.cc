// End-to-end test of a free-threaded CPython (3.13t, no GIL): the 3.13t that
// scripts/free-threaded-python.sh builds runs workloads/free_threaded_threads.py,
// eight threads busy at once, each in its own leaf function (names in every
// string kind; one of them, kernel_reads, mostly in read(2)), while
// short-lived threads come and go. One PyPerf run per
// line mode (the default, first; --line-numbers current), native frames on (the default), checks
// each busy thread: its own leaf under its own worker as the innermost Python frame, the eval loop
// among the native frames below, frames in order, few error markers, kernel_reads's samples under
// the syscall entry in kernel frames; and that the short-lived threads were profiled too.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "FrameSpelling.h"
#include "support/collapsed.h"
#include "support/e2e.h"
#include "support/python_roots.h"
#include "support/python_source.h"
#include "support/test_support.h"

namespace pyperf_test {
namespace {

constexpr char kWorkload[] = "free_threaded_threads.py";
constexpr int kFrequencyHz = 199;
// CPU time of the whole process per run: with nine threads on two shared
// cores, about a second per busy thread, a hundred-odd samples each.
constexpr milliseconds kProcessCpu{8000};
// Share of a busy thread's samples whose innermost Python frames must be its
// worker and leaf: the loop is all it does; a sample may still fall between
// the two calls at start, or carry an error marker.
constexpr double kLeafPercent = 95.0;
// Of those, the share whose native frames show the eval loop (as
// test_e2e_versions.cc asks of every target).
constexpr double kEvalLoopPercent = 90.0;
// The thread that reads /dev/urandom (about a millisecond of kernel work per
// read): a floor on the share of its leaf's samples in the system call, and
// the share of those whose kernel frames show the syscall entry after the
// leaf (as test_e2e_python_stacks.cc asks of calltree.py's syscall_loop).
constexpr char kKernelLeaf[] = "kernel_reads";
constexpr double kInSyscallPercent = 20.0;
constexpr double kSyscallChainPercent = 95.0;
// Samples that may carry an error marker (shared, busy machine).
constexpr double kMaxErrorPercent = 2.0;

struct BusyThread {
  const char* worker;
  const char* leaf;
};
// Thread i of the workload: worker_<i> -> leaf.
const std::vector<BusyThread> kBusyThreads = {
    {"worker_0", "spin_ascii"}, {"worker_1", "größe"},     {"worker_2", "grüße_λ"},
    {"worker_3", "计算_线程"},  {"worker_4", "𠀀𠀁_spin"}, {"worker_5", "busy_five"},
    {"worker_6", "busy_six"},   {"worker_7", kKernelLeaf},
};

std::optional<std::string> PythonLeaf(const CollapsedLine& line) {
  auto python = FramesOfKind(line, FrameKind::kPython);
  if (python.empty()) return std::nullopt;
  return python.back();
}

bool HasPythonFunction(const CollapsedLine& line, const std::string& function) {
  for (const auto& f : FramesOfKind(line, FrameKind::kPython)) {
    auto parsed = ParsePythonFrame(f);
    if (parsed && parsed->function == function) return true;
  }
  return false;
}

class FreeThreadedE2E : public ::testing::TestWithParam<std::string> {};

TEST_P(FreeThreadedE2E, EveryBusyThreadShowsItsOwnLeaf) {
  const std::string& line_mode = GetParam();
  std::string why;
  auto path = FreeThreadedPython(&why);
  if (!path) PYPERF_SKIP_OR_FAIL("no free-threaded CPython: " + why);
  PYPERF_REQUIRE_BPF();
  Interpreter python{"python3.13t", *path};
  auto workload = StartWorkload(python, kWorkload);
  ASSERT_NE(workload, nullptr);
  const pid_t pid = workload->pid();
  PythonSource source(WorkloadPath(kWorkload));
  ASSERT_FALSE(source.empty());

  // "default" passes no --line-numbers: PyPerf's default is "first".
  std::vector<std::string> args = {"-F", std::to_string(kFrequencyHz), "-p", std::to_string(pid)};
  if (line_mode != "default") args.insert(args.end(), {"--line-numbers", line_mode});
  PyPerfRun run = ProfileUntilEachRan(args, {pid}, kProcessCpu, "3.13t " + line_mode);
  EXPECT_EQ(run.stderr_text.find("free-threaded build"), std::string::npos) << run.stderr_text;
  auto lines = run.profile.OfPid(pid);
  ASSERT_FALSE(lines.empty()) << "no samples of the 3.13t workload; PyPerf said:\n"
                              << run.stderr_text;
  ExpectWellFormed(lines);

  ExpectFewErrorMarkers(lines, kMaxErrorPercent);

  const std::string eval_loop =
      ebpf::pyperf::SpellFrame(ebpf::pyperf::FrameKind::kNative, "_PyEval_EvalFrameDefault");
  std::set<pid_t> tids;
  std::printf("%-10s %-12s %8s %8s %8s %8s\n", "thread", "function", "samples", "leaf ok",
              "eval ok", "syscall");
  for (const BusyThread& busy : kBusyThreads) {
    auto tid = ThreadRunning(run.profile, pid, busy.leaf, std::nullopt);
    if (!tid) continue;  // ThreadRunning failed the test
    EXPECT_TRUE(tids.insert(*tid).second) << busy.leaf << " shares thread " << *tid;
    auto mine = run.profile.OfTid(*tid);
    auto good =
        ExpectShareEndingWith(mine, {busy.worker, busy.leaf}, false, kLeafPercent,
                              std::string(busy.leaf) + " in thread " + std::to_string(*tid));
    // The leaf's line: its first line, or one of its body's in "current" mode.
    const int first = source.FirstLine(busy.leaf), last = source.LastLine(busy.leaf);
    uint64_t with_eval = 0, with_syscall = 0;
    const std::string leaf_name = busy.leaf;
    auto under_syscall = [&](const CollapsedLine& line) {
      return FindInOrder(line.frames, {[&](const std::string& f) {
                                         auto parsed = ParsePythonFrame(f);
                                         return parsed && parsed->function == leaf_name;
                                       },
                                       IsSyscallEntryFrame})
          .has_value();
    };
    for (const auto& line : good) {
      auto leaf = ParsePythonFrame(*PythonLeaf(line));
      ASSERT_TRUE(leaf.has_value()) << line.text;
      EXPECT_EQ(leaf->file, WorkloadPath(kWorkload)) << line.text;
      if (line_mode == "default") {
        EXPECT_EQ(leaf->line, first) << line.text;
      } else {
        EXPECT_GT(leaf->line, first) << line.text;
        EXPECT_LE(leaf->line, last) << line.text;
      }
      auto native = FramesOfKind(line, FrameKind::kNative);
      if (std::find(native.begin(), native.end(), eval_loop) != native.end())
        with_eval += line.count;
      if (under_syscall(line)) with_syscall += line.count;
    }
    uint64_t leaf_samples = SumCounts(good);
    EXPECT_GE(100.0 * static_cast<double>(with_eval),
              kEvalLoopPercent * static_cast<double>(leaf_samples))
        << with_eval << " of " << leaf_samples << " samples of " << busy.leaf << " show "
        << eval_loop << ":" << Excerpt(good, 3);
    if (leaf_name == kKernelLeaf)
      ExpectSystemCallSamples(good, under_syscall, kInSyscallPercent, kSyscallChainPercent,
                              "of " + leaf_name + " show the syscall entry after the leaf");
    std::printf("%-10d %-12s %8llu %8llu %8llu %8llu\n", *tid, busy.leaf,
                static_cast<unsigned long long>(SumCounts(mine)),
                static_cast<unsigned long long>(leaf_samples),
                static_cast<unsigned long long>(with_eval),
                static_cast<unsigned long long>(with_syscall));
  }

  // Threads that started and ended during the run were profiled: several
  // distinct ones ran churn_worker -> churn_leaf.
  auto churned = run.profile.TidsWhere([&](const CollapsedLine& line) {
    return line.pid == pid && HasPythonFunction(line, "churn_leaf");
  });
  std::printf("short-lived threads profiled: %zu\n", churned.size());
  EXPECT_GE(churned.size(), 2u) << "short-lived threads seen: " << churned.size();
  for (pid_t tid : churned) EXPECT_EQ(tids.count(tid), 0u) << tid;
}

INSTANTIATE_TEST_SUITE_P(LineModes, FreeThreadedE2E, ::testing::Values("default", "current"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace pyperf_test
