// End-to-end tests of processes that make PyPerf's job hard on purpose
// (issue 11): frame chains the process corrupts itself (a loop, a pointer to
// unmapped memory), a recursion 10,000 frames deep, 1,000 and more threads,
// threads that keep exiting while their state is cached, and a profiled pid
// reused by a process that is not Python. In each case PyPerf prints only
// frames that are really there, marks what it could not walk, and keeps
// running.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "FrameSpelling.h"
#include "PyPerfBpfShared.h"
#include "support/collapsed.h"
#include "support/e2e.h"
#include "support/test_support.h"

namespace pyperf_test {
namespace {

// PyPerf over `pids` until signalled (see ProfileUntilEachRan).
std::vector<std::string> ProfileArgs(const std::vector<pid_t>& pids, int frequency) {
  std::vector<std::string> args = {"-F", std::to_string(frequency)};
  for (pid_t pid : pids) args.insert(args.end(), {"-p", std::to_string(pid)});
  return args;
}

std::vector<std::string> PythonFunctions(const CollapsedLine& line) {
  std::vector<std::string> out;
  for (const auto& frame : PythonFramesOf(line)) out.push_back(frame.function);
  return out;
}

bool HasFrame(const CollapsedLine& line, const std::string& frame) {
  return std::find(line.frames.begin(), line.frames.end(), frame) != line.frames.end();
}

// A line for a failure message, cut: a deep stack's line is tens of KiB.
std::string Short(const CollapsedLine& line) {
  constexpr size_t kMax = 400;
  if (line.text.size() <= kMax) return line.text;
  return line.text.substr(0, kMax / 2) + " ... " + line.text.substr(line.text.size() - kMax / 2);
}

std::string Joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ";") + item;
  return out;
}

// ---------------------------------------------------------------------------
// Frame chains the process corrupts (tests/cc/workloads/corrupt_frames.py).

struct Corruption {
  std::string mode;                    // the workload's argument
  uint8_t error;                       // the marker every sample must carry
  std::vector<std::string> functions;  // the Python frames, root to leaf, each once
};

const std::vector<Corruption> kCorruptions = {
    // middle's caller link points at middle: middle and spin, then the loop.
    {"self", PYPERF_ERROR_FRAME_CYCLE, {"middle", "spin"}},
    // outer's caller link points at spin: a loop of three frames, each once.
    {"loop", PYPERF_ERROR_FRAME_CYCLE, {"outer", "middle", "spin"}},
    // middle's caller link points at an unmapped page: the frames below it.
    {"unmapped", PYPERF_ERROR_FRAME_UNREADABLE, {"middle", "spin"}},
};

// Both frame layouts (PyFrameObject to 3.10, _PyInterpreterFrame from 3.11,
// with 3.12's shims and 3.13's f_executable).
const std::vector<std::string> kCorruptionInterpreters = {"2.7",  "3.9",  "3.10",
                                                          "3.11", "3.12", "3.13"};

TEST(CorruptFrameChains, AreCutWhereTheyGoWrongAndMarkedNeverShownWrong) {
  PYPERF_REQUIRE_BPF();
  struct Target {
    std::string what;
    const Corruption* corruption;
    std::unique_ptr<ChildProcess> process;
  };
  std::vector<Target> targets;
  std::vector<pid_t> pids;
  for (const auto& spec : kCorruptionInterpreters) {
    auto python = FindInterpreter(spec);
    if (!python) PYPERF_SKIP_OR_FAIL("no interpreter " + spec);
    for (const auto& corruption : kCorruptions) {
      auto process = StartWorkload(*python, "corrupt_frames.py", {corruption.mode});
      ASSERT_NE(process, nullptr) << spec << " " << corruption.mode;
      pids.push_back(process->pid());
      targets.push_back({python->name + " " + corruption.mode, &corruption, std::move(process)});
    }
  }
  PyPerfRun run = ProfileUntilEachRan(ProfileArgs(pids, 49), pids, milliseconds(300),
                                      "PyPerf over corrupt frame chains");
  for (const auto& target : targets) {
    SCOPED_TRACE(target.what);
    EXPECT_TRUE(target.process->Running()) << "the workload died";
    auto lines = run.profile.OfPid(target.process->pid());
    EXPECT_FALSE(lines.empty()) << "no samples";
    const std::string marker = ebpf::pyperf::SampleErrorFrame(target.corruption->error);
    // The process spins in spin() for good: every sample is in it.
    for (const auto& line : lines) {
      EXPECT_TRUE(HasFrame(line, marker)) << "no " << marker << ":\n  " << Short(line);
      EXPECT_EQ(Joined(PythonFunctions(line)), Joined(target.corruption->functions))
          << "Python frames other than the ones really there:\n  " << Short(line);
      EXPECT_FALSE(IsTruncated(line)) << Short(line);
    }
  }
  auto errors = DumpCounter(run.stderr_text, "sample errors");
  ASSERT_TRUE(errors.has_value());
  EXPECT_EQ(*errors, run.profile.TotalSamples()) << "each sample's marker is counted";
}

// ---------------------------------------------------------------------------
// A recursion 10,000 frames deep: the 128 innermost frames, marked truncated.

TEST(DeepRecursion, TenThousandFramesShowTheInnermost128Marked) {
  PYPERF_REQUIRE_BPF();
  std::vector<std::unique_ptr<ChildProcess>> processes;
  std::vector<pid_t> pids;
  for (const std::string spec : {"3.10", "3.12"}) {
    auto python = FindInterpreter(spec);
    if (!python) PYPERF_SKIP_OR_FAIL("no interpreter " + spec);
    auto process = StartWorkload(*python, "corrupt_frames.py", {"deep", "10000"});
    ASSERT_NE(process, nullptr) << spec;
    pids.push_back(process->pid());
    processes.push_back(std::move(process));
  }
  PyPerfRun run = ProfileUntilEachRan(ProfileArgs(pids, 99), pids, milliseconds(1000),
                                      "PyPerf over deep recursions");
  for (const auto& process : processes) {
    SCOPED_TRACE("pid " + std::to_string(process->pid()));
    // The recursing thread is the one busy thread; the main thread waits in join().
    std::vector<CollapsedLine> deep;
    for (const auto& line : run.profile.OfPid(process->pid()))
      if (line.tid != process->pid()) deep.push_back(line);
    ASSERT_FALSE(deep.empty()) << "no samples of the recursing thread";
    for (const auto& line : deep) {
      EXPECT_TRUE(IsTruncated(line)) << Short(line);
      auto functions = PythonFunctions(line);
      EXPECT_EQ(functions.size(), PYPERF_MAX_FRAMES) << Short(line);
      EXPECT_TRUE(std::all_of(functions.begin(), functions.end(), [](const std::string& f) {
        return f == "deep";
      })) << Short(line);
      EXPECT_TRUE(ErrorMarkers(line).empty())
          << "a marker besides the truncation:\n  " << Short(line);
    }
  }
}

// ---------------------------------------------------------------------------
// 1,000 threads are found; beyond the 1,024 thread states the BPF program
// walks, the thread's samples are marked, never given another thread's stack.

// The thread states the BPF program walks at most (PyPerfBpf.cc).
constexpr int kThreadStatesWalked = 1024;

// The parameter: sleeping threads started after the two busy ones.
class ManyThreadsTest : public ::testing::TestWithParam<int> {};

TEST_P(ManyThreadsTest, ThreadsAreFoundOrMarked) {
  PYPERF_REQUIRE_BPF();
  auto python = FindInterpreter("3.11");
  if (!python) PYPERF_SKIP_OR_FAIL("no interpreter 3.11");
  const int threads = GetParam();
  // The main thread and the busy one are the oldest, deepest in the list.
  const bool all_found = threads + 2 <= kThreadStatesWalked;
  auto workload =
      StartWorkload(*python, "many_threads.py", {}, {{"THREADS", std::to_string(threads)}});
  ASSERT_NE(workload, nullptr);
  PyPerfRun run = ProfileUntilEachRan(ProfileArgs({workload->pid()}, 99), {workload->pid()},
                                      milliseconds(1000), "PyPerf over many threads");
  auto lines = run.profile.OfPid(workload->pid());
  ASSERT_FALSE(lines.empty());
  const std::string marker = ebpf::pyperf::SampleErrorFrame(PYPERF_ERROR_THREAD_STATE);
  uint64_t marked = 0, found = 0;
  for (const auto& line : lines) {
    auto functions = PythonFunctions(line);
    if (HasFrame(line, marker)) {
      marked += line.count;
      EXPECT_TRUE(functions.empty()) << "a marked sample with Python frames:\n  " << Short(line);
      continue;
    }
    if (functions.empty()) continue;  // e.g. in the C code of a thread start
    found += line.count;
    // Each thread runs one of these forever, and nothing else.
    const std::string& leaf = functions.back();
    EXPECT_TRUE(leaf == "busy_first_thread" || leaf == "main_spin" || leaf == "sleeper")
        << Short(line);
  }
  std::printf("%d threads: %llu samples found their thread, %llu marked %s\n", threads,
              (unsigned long long)found, (unsigned long long)marked, marker.c_str());
  if (all_found) {
    EXPECT_EQ(marked, 0u);
    EXPECT_GT(found, 0u);
  } else {
    // The busy threads are past the walk: their samples are marked.
    EXPECT_GT(marked, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, ManyThreadsTest, ::testing::Values(1000, 1100));

// ---------------------------------------------------------------------------
// Threads that exit while their state is cached: a new thread (reusing the
// old one's tid, stack, pthread_self and PyThreadState memory) never gets the
// old one's frames.

TEST(ThreadChurn, AThreadNeverShowsAnExitedThreadsFrames) {
  PYPERF_REQUIRE_BPF();
  auto python = FindInterpreter("3.11");
  if (!python) PYPERF_SKIP_OR_FAIL("no interpreter 3.11");
  auto workload = StartWorkload(*python, "thread_churn.py");
  ASSERT_NE(workload, nullptr);
  PyPerfRun run = ProfileUntilEachRan(ProfileArgs({workload->pid()}, 199), {workload->pid()},
                                      milliseconds(2000), "PyPerf over thread churn");
  uint64_t even = 0, odd = 0;
  std::vector<pid_t> tids;
  for (const auto& line : run.profile.OfPid(workload->pid())) {
    if (line.comm != "even" && line.comm != "odd") continue;
    if (std::find(tids.begin(), tids.end(), line.tid) == tids.end()) tids.push_back(line.tid);
    auto functions = PythonFunctions(line);
    const std::string own = line.comm + "_work";
    const std::string other = line.comm == "even" ? "odd_work" : "even_work";
    EXPECT_TRUE(std::find(functions.begin(), functions.end(), other) == functions.end())
        << "a thread named " << line.comm << " shows " << other << ":\n  " << Short(line);
    if (std::find(functions.begin(), functions.end(), own) != functions.end())
      (line.comm == "even" ? even : odd) += line.count;
  }
  std::printf("%zu distinct tids sampled; samples in even_work %llu, in odd_work %llu\n",
              tids.size(), (unsigned long long)even, (unsigned long long)odd);
  // Threads came and went on reused tids, and both kinds were seen in their
  // own function.
  EXPECT_GT(even, 0u);
  EXPECT_GT(odd, 0u);
}

// ---------------------------------------------------------------------------
// A profiled process exits and its pid is taken by a process that is not
// Python: no sample of the new process has Python frames.

// Starts `argv` with pid `pid` (ns_last_pid set to pid - 1 just before the
// fork; another fork on the host may take it first, so a few tries).
std::unique_ptr<ChildProcess> StartWithPid(pid_t pid, const std::vector<std::string>& argv) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    {
      std::ofstream last("/proc/sys/kernel/ns_last_pid");
      last << (pid - 1);
      if (!last.flush()) return nullptr;
    }
    auto child = std::make_unique<ChildProcess>(argv);
    if (child->pid() == pid) return child;
    child->Signal(SIGKILL);
    child->Wait(seconds(5));
  }
  return nullptr;
}

TEST(PidReuse, ANonPythonProcessOnAReusedPidNeverGetsPythonFrames) {
  PYPERF_REQUIRE_BPF();
  auto python = AnyInterpreter();
  if (!python) PYPERF_SKIP_OR_FAIL("no Python interpreter installed");
  auto workload = StartWorkload(*python, "corrupt_frames.py", {"deep", "3"});
  ASSERT_NE(workload, nullptr);
  const pid_t pid = workload->pid();
  // The whole host, so the new process is looked at as any other would be.
  auto pyperf = StartPyPerf({"-F", "199", "-d", "600", "--update-interval", "1"});
  ASSERT_TRUE(WaitForStderr(*pyperf, "Ready to profile", seconds(60)));
  ASSERT_TRUE(WaitForCpu(pid, milliseconds(500)));
  workload->Signal(SIGKILL);
  workload->Wait(seconds(10));
  // A busy shell loop: no Python in it.
  auto shell = StartWithPid(pid, {"/bin/sh", "-c", "while :; do :; done"});
  ASSERT_NE(shell, nullptr) << "could not start a process with pid " << pid;
  ASSERT_TRUE(WaitForCpu(pid, milliseconds(1500)));
  pyperf->Signal(SIGTERM);
  PyPerfRun run = FinishPyPerf(*pyperf, "PyPerf over a reused pid", kPyPerfTimeout);
  uint64_t python_samples = 0, shell_samples = 0;
  for (const auto& line : run.profile.OfPid(pid)) {
    if (line.comm == "sh") {
      shell_samples += line.count;
      EXPECT_TRUE(FramesOfKind(line, FrameKind::kPython).empty())
          << "the shell on the reused pid with Python frames:\n  " << Short(line);
    } else if (!FramesOfKind(line, FrameKind::kPython).empty()) {
      python_samples += line.count;
    }
  }
  std::printf("pid %d: %llu samples of the Python process, %llu of the shell after it\n", pid,
              (unsigned long long)python_samples, (unsigned long long)shell_samples);
  EXPECT_GT(python_samples, 0u) << "the Python process was never sampled";
  shell->Signal(SIGKILL);
}

}  // namespace
}  // namespace pyperf_test
