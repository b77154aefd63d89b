// End-to-end tests of the start-up check of --fs-offset and --stack-offset
// (issue 10), with the built PyPerf and real interpreters:
//
//  - the right flags (BTF's values, read here) are used without a word, and a
//    pure-Python single-threaded workload has a thread state in every sample;
//  - a wrong --fs-offset, or a wrong --stack-offset, gives exactly one warning
//    line naming both flags, and BTF's values are used: Python frames, and
//    native frames under system calls (read through task->stack);
//  - with BTF hidden (a private mount namespace with an empty file over
//    /sys/kernel/btf/vmlinux) wrong flags are one error line and exit 1, no
//    flags are one error line and exit 1, and right flags just work.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "btf_offsets.h"
#include "support/collapsed.h"
#include "support/e2e.h"
#include "support/test_support.h"

namespace pyperf_test {
namespace {

constexpr int kFrequencyHz = 199;
constexpr int kProfileSeconds = 2;  // cases 1 and 3

std::vector<std::string> ProfileArgs(pid_t pid, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"-F", std::to_string(kFrequencyHz),
                                   "-d", std::to_string(kProfileSeconds),
                                   "-p", std::to_string(pid)};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::vector<std::string> OffsetFlags(uint64_t fs, uint64_t stack) {
  return {"--fs-offset", std::to_string(fs), "--stack-offset", std::to_string(stack)};
}

std::vector<std::string> LinesContaining(const std::string& text, const std::string& part) {
  std::vector<std::string> out;
  for (const auto& line : SplitLines(text))
    if (line.find(part) != std::string::npos) out.push_back(line);
  return out;
}

bool HasPythonFrame(const CollapsedLine& line) {
  return !FramesOfKind(line, FrameKind::kPython).empty();
}

uint64_t SamplesWhere(const std::vector<CollapsedLine>& lines,
                      const std::function<bool(const CollapsedLine&)>& pred,
                      std::vector<CollapsedLine>* matching = nullptr) {
  uint64_t n = 0;
  for (const auto& line : lines) {
    if (!pred(line)) continue;
    n += line.count;
    if (matching) matching->push_back(line);
  }
  return n;
}

ebpf::KernelOffsets BtfOffsets() {
  auto offsets = ebpf::ReadKernelOffsets();
  EXPECT_TRUE(offsets.ok()) << offsets.error();
  return offsets.ok() ? *offsets : ebpf::KernelOffsets{};
}

// Every case reads BTF's offsets and profiles a workload on AnyInterpreter().
class KernelOffsetFlags : public ::testing::Test {
 protected:
  // Reads BTF's offsets (btf_) and starts `script` on `python` (workload_, pid_).
  void Start(const Interpreter& python, const std::string& script) {
    btf_ = BtfOffsets();
    ASSERT_NE(btf_.fs_base, 0u);
    workload_ = StartWorkload(python, script);
    ASSERT_NE(workload_, nullptr);
    pid_ = workload_->pid();
  }

  ebpf::KernelOffsets btf_;
  std::unique_ptr<ChildProcess> workload_;
  pid_t pid_ = -1;
};

// Case 1: BTF's values given as flags pass silently, and every sample of a
// pure-Python single-threaded process finds its thread state.
TEST_F(KernelOffsetFlags, RightFlagsAreUsedWithoutAWord) {
  auto python = AnyInterpreter();
  PYPERF_REQUIRE_PYTHON_AND_BPF(python, "no Python interpreter installed");
  ASSERT_NO_FATAL_FAILURE(Start(*python, "native_busy_loop.py"));

  auto pyperf = StartPyPerf(ProfileArgs(pid_, OffsetFlags(btf_.fs_base, btf_.stack)));
  PyPerfRun run = FinishPyPerf(*pyperf, "PyPerf with BTF's values as flags", kPyPerfTimeout);
  EXPECT_TRUE(LinesContaining(run.stderr_text, "warning").empty()) << run.stderr_text;
  auto lines = run.profile.OfPid(pid_);
  uint64_t total = SumCounts(lines);
  std::vector<CollapsedLine> without;
  uint64_t python_samples = SamplesWhere(lines, HasPythonFrame);
  SamplesWhere(
      lines, [](const CollapsedLine& l) { return !HasPythonFrame(l); }, &without);
  EXPECT_GT(total, 0u) << "no samples of pid " << pid_;
  // `while 1: pass` at module level: the <module> frame is in every sample.
  EXPECT_EQ(python_samples, total) << "samples without Python frames:" << Excerpt(without);
  // A single Python thread that holds its thread state from before "ready"
  // until it is killed: no sample may miss it (so it was, when this test was
  // written, on pyenv's 2.7 and 3.6 to 3.13 and Debian's 3.11).
  EXPECT_EQ(DumpCounter(run.stderr_text, "no thread state"), std::optional<uint64_t>(0))
      << run.stderr_text;
}

// Case 2: a wrong --fs-offset, or a wrong --stack-offset, with BTF present:
// one warning naming both flags, and BTF's values are what PyPerf samples
// with. native_read_loop.py is one thread that spends almost all its time in
// readv(2): the <module> frame in its samples shows the fs offset in use is
// right, and named native frames under its kernel frames (the user registers
// come from task->stack there) show the stack offset is. PyPerf runs until
// the workload has had two CPU seconds, however busy the machine.
TEST_F(KernelOffsetFlags, WrongFlagsGiveWayToBtfWithOneWarning) {
  auto python = AnyInterpreter();
  PYPERF_REQUIRE_PYTHON_AND_BPF(python, "no Python interpreter installed");
  ASSERT_NO_FATAL_FAILURE(Start(*python, "native_read_loop.py"));

  // Each flag set to the other's value: a user-space fs_base is not a
  // task->stack a kernel one.
  struct Case {
    std::string what;
    uint64_t fs, stack;
    std::unique_ptr<ChildProcess> pyperf;
  };
  std::vector<Case> cases;
  cases.push_back({"wrong --fs-offset", btf_.stack, btf_.stack, nullptr});
  cases.push_back({"wrong --stack-offset", btf_.fs_base, btf_.fs_base, nullptr});
  const std::vector<std::string> no_duration = {"-F", std::to_string(kFrequencyHz), "-p",
                                                std::to_string(pid_)};
  for (auto& c : cases) {
    auto args = no_duration;
    for (const auto& flag : OffsetFlags(c.fs, c.stack)) args.push_back(flag);
    c.pyperf = StartPyPerf(args);
  }
  for (auto& c : cases)
    ASSERT_TRUE(WaitForStderr(*c.pyperf, "Ready to profile", kPyPerfTimeout))
        << c.what << ": " << c.pyperf->Stderr();
  EXPECT_TRUE(WaitForCpu(pid_, seconds(2))) << "the workload did not run";
  for (auto& c : cases) c.pyperf->Signal(SIGTERM);

  for (auto& c : cases) {
    SCOPED_TRACE(c.what);
    PyPerfRun run = FinishPyPerf(*c.pyperf, "PyPerf with a " + c.what, kPyPerfTimeout);
    auto warnings = LinesContaining(run.stderr_text, "warning");
    ASSERT_EQ(warnings.size(), 1u) << run.stderr_text;
    const std::string& w = warnings[0];
    EXPECT_EQ(w.rfind("PyPerf: warning: ", 0), 0u) << w;
    const std::string named = "--fs-offset " + std::to_string(c.fs) + " / --stack-offset " +
                              std::to_string(c.stack) + " fail the check";
    EXPECT_NE(w.find(named), std::string::npos) << w;
    const std::string used = "using BTF's values fs " + std::to_string(btf_.fs_base) + ", stack " +
                             std::to_string(btf_.stack);
    EXPECT_NE(w.find(used), std::string::npos) << w;

    auto lines = run.profile.OfPid(pid_);
    // Module level: the <module> frame is in every sample the fs offset finds.
    ExpectShareOfSamples(
        lines,
        [](const CollapsedLine& l) {
          return std::any_of(l.frames.begin(), l.frames.end(), [](const std::string& f) {
            return IsPythonFunction(f, "<module>", "");
          });
        },
        95, "samples with the <module> frame");
    std::vector<CollapsedLine> in_syscall;
    SamplesWhere(
        lines, [](const CollapsedLine& l) { return !FramesOfKind(l, FrameKind::kKernel).empty(); },
        &in_syscall);
    // A wrong task->stack gives native markers, not native frames: samples
    // in the kernel have named ones.
    ExpectShareOfSamples(
        in_syscall,
        [](const CollapsedLine& l) {
          auto native = FramesOfKind(l, FrameKind::kNative);
          return std::any_of(native.begin(), native.end(),
                             [](const std::string& f) { return !IsNativeMarker(f); });
        },
        50, "samples in the kernel with named native frames");
  }
}

// Runs PyPerf with `args` in a private mount namespace where
// /sys/kernel/btf/vmlinux is an empty file.
CommandResult RunPyPerfWithoutBtf(const std::vector<std::string>& args, const TempDir& dir) {
  const std::string empty = dir.File("empty-vmlinux");
  FILE* f = fopen(empty.c_str(), "w");
  if (f) fclose(f);
  std::vector<std::string> argv = {FindInPath("unshare"),
                                   "--mount",
                                   "--propagation",
                                   "private",
                                   "/bin/sh",
                                   "-c",
                                   "mount --bind \"$0\" /sys/kernel/btf/vmlinux && exec \"$@\"",
                                   empty,
                                   PyPerfBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, kPyPerfTimeout);
}

// Case 3: BTF unavailable. Wrong flags: nothing passes, one error line naming
// the flags, exit 1; no flags: one error line naming them as the way out;
// right flags: they pass and are used.
TEST_F(KernelOffsetFlags, WithoutBtfWrongFlagsAreOneErrorLine) {
  auto python = AnyInterpreter();
  PYPERF_REQUIRE_PYTHON_AND_BPF(python, "no Python interpreter installed");
  if (geteuid() != 0) PYPERF_SKIP_OR_FAIL("needs root for a private mount namespace");
  if (FindInPath("unshare").empty()) PYPERF_SKIP_OR_FAIL("unshare is not installed");
  ASSERT_NO_FATAL_FAILURE(Start(*python, "native_busy_loop.py"));
  TempDir dir;

  {
    SCOPED_TRACE("wrong flags, no BTF");
    CommandResult wrong =
        RunPyPerfWithoutBtf(ProfileArgs(pid_, OffsetFlags(btf_.stack, btf_.fs_base)), dir);
    EXPECT_EQ(wrong.exit_code, 1) << wrong.err;
    auto lines = SplitLines(wrong.err);
    ASSERT_EQ(lines.size(), 1u) << wrong.err;
    EXPECT_EQ(lines[0].rfind("PyPerf: error: ", 0), 0u) << lines[0];
    const std::string named = "--fs-offset " + std::to_string(btf_.stack) + " / --stack-offset " +
                              std::to_string(btf_.fs_base) + " fail the check";
    EXPECT_NE(lines[0].find(named), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find("/sys/kernel/btf/vmlinux"), std::string::npos) << lines[0];
    EXPECT_TRUE(wrong.out.empty()) << wrong.out;
  }
  {
    SCOPED_TRACE("no flags, no BTF");
    CommandResult none = RunPyPerfWithoutBtf(ProfileArgs(pid_), dir);
    EXPECT_EQ(none.exit_code, 1) << none.err;
    auto lines = SplitLines(none.err);
    ASSERT_EQ(lines.size(), 1u) << none.err;
    EXPECT_EQ(lines[0].rfind("PyPerf: error: ", 0), 0u) << lines[0];
    EXPECT_NE(lines[0].find("--fs-offset"), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find("--stack-offset"), std::string::npos) << lines[0];
  }
  {
    SCOPED_TRACE("right flags, no BTF");
    CommandResult right =
        RunPyPerfWithoutBtf(ProfileArgs(pid_, OffsetFlags(btf_.fs_base, btf_.stack)), dir);
    EXPECT_EQ(right.exit_code, 0) << right.err;
    EXPECT_TRUE(LinesContaining(right.err, "warning").empty()) << right.err;
    EXPECT_TRUE(LinesContaining(right.err, "PyPerf: error").empty()) << right.err;
    CollapsedProfile profile = ParseCollapsed(right.out);
    EXPECT_GT(SamplesWhere(profile.OfPid(pid_), HasPythonFrame), 0u)
        << "no Python frames:" << Excerpt(profile.OfPid(pid_));
  }
}

}  // namespace
}  // namespace pyperf_test
