// End-to-end test of a full kernel stacks map: kernel_stacks.py's threads
// each loop in a system call of their own, leaving far more distinct kernel
// stacks than --kernel-stacks-map-size 32 holds. PyPerf must:
//  - never print another sample's kernel frames: a thread's kernel frames
//    never name another thread's system call (a slot reused for a new stack
//    while an event naming the old one is in flight would show exactly that);
//  - mark each stack it lost "[Lost Kernel Stack]_[pe]" and count it, the
//    dump line's "kernel stack errors" equal to the marked samples;
//  - keep printing kernel frames once the map has been full: it empties the
//    map (the dump line's "kernel stacks freed"), and the intervals after
//    that hold each busy thread's own system call again.
// The test paces its dumps on the workload's CPU time (stopping PyPerf for a
// part of each, so that events are in flight) and waits on PyPerf's dump
// lines, each with a deadline, so a busy machine only makes it longer.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "support/collapsed.h"
#include "support/e2e.h"
#include "support/test_support.h"

namespace pyperf_test {
namespace {

// Slots for far fewer stacks than the workload makes: a stack whose slot is
// taken is lost, and a PyPerf that let a new stack take an old one's slot
// would print it for samples still in flight.
constexpr int kMapSize = 8;
// Enough intervals that such a PyPerf shows it.
constexpr size_t kMinDumps = 6;
constexpr auto kDeadline = seconds(180);

// The kernel functions only one system call of the workload passes through,
// by the Python function (thread) making it.
const std::map<std::string, std::set<std::string>>& OwnCalls() {
  static const std::map<std::string, std::set<std::string>> calls = {
      {"read_loop", {"ksys_read", "vfs_read", "read_zero", "read_iter_zero", "__x64_sys_read"}},
      {"getrandom_loop", {"__x64_sys_getrandom", "__do_sys_getrandom", "get_random_bytes_user"}},
      {"stat_loop",
       {"__x64_sys_newfstatat", "__do_sys_newfstatat", "vfs_fstatat", "vfs_statx",
        "__x64_sys_statx", "do_statx"}},
      {"write_loop",
       {"ksys_write", "vfs_write", "write_null", "write_iter_null", "__x64_sys_write"}},
  };
  return calls;
}

// The workload thread a line belongs to: its innermost Python function.
std::optional<std::string> ThreadOf(const CollapsedLine& line) {
  auto leaf = LeafIgnoringNativeAndKernel(line);
  if (!leaf) return std::nullopt;
  for (const auto& [function, calls] : OwnCalls())
    if (IsPythonFunction(*leaf, function)) return function;
  return std::nullopt;
}

// The workload's calls named by the line's kernel frames (by thread).
std::set<std::string> CallsNamed(const CollapsedLine& line) {
  std::set<std::string> named;
  for (const auto& frame : FramesOfKind(line, FrameKind::kKernel)) {
    std::string name = frame.substr(0, frame.size() - ebpf::pyperf::kKernelSuffix.size());
    for (const auto& [thread, calls] : OwnCalls())
      if (calls.count(name)) named.insert(thread);
  }
  return named;
}

struct Dump {
  CollapsedProfile profile;
  uint64_t errors = 0, freed = 0;
};

TEST(KernelStacks, AFullMapLosesStacksMarkedAndCountedNeverAnotherSamplesFrames) {
  auto python = FindInterpreter("3.11");
  PYPERF_REQUIRE_PYTHON_AND_BPF(python, "pyenv's Python 3.11 is not installed");
  TempDir dir;
  auto workload = StartWorkload(*python, "kernel_stacks.py", {dir.path()});
  ASSERT_NE(workload, nullptr);
  const std::string out = dir.File("pyperf.col");
  auto pyperf =
      StartPyPerf({"-F", "499", "--kernel-stacks-map-size", std::to_string(kMapSize),
                   "--user-stacks-pages", "0", "-o", out, "-p", std::to_string(workload->pid())});
  ASSERT_TRUE(WaitFor([&] { return FileExists(out) || !pyperf->Running(); }, kDeadline) &&
              pyperf->Running())
      << "PyPerf did not become ready; stderr:\n"
      << pyperf->Stderr();

  // One dump: after the workload has had another CPU second to sample, a
  // SIGUSR2, then PyPerf's dump line and the file it names. For the first
  // quarter of that second PyPerf is stopped, so events pile up in the perf
  // buffers while their kernel stacks' slots are wanted by newer stacks.
  std::vector<Dump> dumps;
  auto dump_once = [&]() -> bool {
    pyperf->Signal(SIGSTOP);
    bool ran = WaitForCpu(workload->pid(), milliseconds(250));
    pyperf->Signal(SIGCONT);
    if (!ran || !WaitForCpu(workload->pid(), milliseconds(750))) return false;
    auto line = RequestDump(*pyperf, seconds(60));
    if (!line || DumpOutputPath(*line).empty()) return false;
    Dump dump;
    dump.profile = ParseCollapsed(ReadFile(DumpOutputPath(*line)));
    dump.errors = DumpCounter(*line, "kernel stack errors").value_or(0);
    dump.freed = DumpCounter(*line, "kernel stacks freed").value_or(0);
    dumps.push_back(std::move(dump));
    return true;
  };

  // The samples of a busy thread, in the intervals after dump `from`, that
  // show its own call's kernel frames.
  auto own_after = [&](size_t from, const std::string& thread) {
    uint64_t own = 0;
    for (size_t i = from + 1; i < dumps.size(); ++i)
      for (const auto& line : dumps[i].profile.OfPid(workload->pid()))
        if (ThreadOf(line) == thread && CallsNamed(line).count(thread)) own += line.count;
    return own;
  };
  const std::vector<std::string> busy_threads = {"read_loop", "getrandom_loop", "stat_loop"};

  // Dumps until one shows lost stacks (the map was full), a later one shows
  // the map emptied since, and the intervals after that hold each busy
  // thread's own call (and kMinDumps in all). A thread that is seldom in its
  // call (stat_loop, on a loaded machine) may need several intervals for one
  // of its few samples there to find a free slot; the deadline bounds that.
  std::optional<size_t> full, emptied;
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(dump_once()) << "no dump; stderr:\n" << pyperf->Stderr();
    size_t i = dumps.size() - 1;
    if (!full && dumps[i].errors > 0) {
      full = i;
    } else if (full && !emptied && dumps[i].freed > 0) {
      emptied = i;
    } else if (emptied && dumps.size() >= kMinDumps &&
               std::all_of(busy_threads.begin(), busy_threads.end(),
                           [&](const std::string& t) { return own_after(*emptied, t) > 0; })) {
      break;
    }
  }
  pyperf->Signal(SIGTERM);
  ASSERT_TRUE(pyperf->Wait(seconds(60)).has_value());
  EXPECT_EQ(pyperf->ExitCode(), 0) << pyperf->Stderr();
  ASSERT_TRUE(full) << "no stack was ever lost: the map of " << kMapSize
                    << " never filled; stderr:\n"
                    << pyperf->Stderr();
  ASSERT_TRUE(emptied) << "the kernel stacks map was never emptied after it filled; stderr:\n"
                       << pyperf->Stderr();

  const std::string lost_marker =
      ebpf::pyperf::SpellFrame(ebpf::pyperf::FrameKind::kMarker, ebpf::pyperf::kLostKernelStack);
  uint64_t wrong = 0, lost = 0, right = 0;
  for (size_t i = 0; i < dumps.size(); ++i) {
    SCOPED_TRACE("dump " + std::to_string(i));
    uint64_t marked = 0;
    std::vector<CollapsedLine> wrong_lines;
    for (const auto& line : dumps[i].profile.OfPid(workload->pid())) {
      const auto& f = line.frames;
      if (std::find(f.begin(), f.end(), lost_marker) != f.end()) marked += line.count;
      auto thread = ThreadOf(line);
      if (!thread) continue;
      auto named = CallsNamed(line);
      named.erase(*thread);
      if (!named.empty()) {
        wrong += line.count;
        wrong_lines.push_back(line);
      } else if (!CallsNamed(line).empty()) {
        right += line.count;
      }
    }
    lost += marked;
    EXPECT_TRUE(wrong_lines.empty())
        << "kernel frames of another thread's system call:" << Excerpt(wrong_lines);
    EXPECT_EQ(marked, dumps[i].errors)
        << "samples marked [Lost Kernel Stack] vs the dump line's kernel stack errors";
  }
  std::cout << "[ e2e ] " << dumps.size() << " dumps (full at " << *full << ", emptied at "
            << *emptied << "): " << right << " samples with their own call's kernel frames, "
            << lost << " lost, " << wrong << " with another's" << std::endl;

  // Once emptied, the map takes new stacks: the intervals after hold kernel
  // stacks none of those up to the one it filled in had (a map never emptied
  // would keep the stacks it filled with and lose every other).
  auto kernel_stacks_of = [&](const Dump& dump) {
    std::set<std::vector<std::string>> stacks;
    for (const auto& line : dump.profile.OfPid(workload->pid())) {
      auto kernel = FramesOfKind(line, FrameKind::kKernel);
      if (!kernel.empty()) stacks.insert(kernel);
    }
    return stacks;
  };
  std::set<std::vector<std::string>> before_full;
  for (size_t i = 0; i <= *full; ++i) {
    auto stacks = kernel_stacks_of(dumps[i]);
    before_full.insert(stacks.begin(), stacks.end());
  }
  size_t new_stacks = 0;
  for (size_t i = *emptied + 1; i < dumps.size(); ++i)
    for (const auto& stack : kernel_stacks_of(dumps[i])) new_stacks += !before_full.count(stack);
  EXPECT_GT(new_stacks, 0u) << "no kernel stack after the map was emptied that was not in it "
                               "already when it filled";

  // The intervals after the map was emptied: each busy thread's own call
  // again. (Not only the last interval: with four threads sharing the GIL
  // and a map this small, one thread's few samples in one interval may all
  // have lost their stacks.)
  for (const auto& thread : busy_threads) {
    EXPECT_GT(own_after(*emptied, thread), 0u)
        << thread << " has no sample with its own call's kernel frames in the "
        << "intervals after the map was emptied:"
        << Excerpt(dumps.back().profile.OfPid(workload->pid()), 12);
  }
}

}  // namespace
}  // namespace pyperf_test
