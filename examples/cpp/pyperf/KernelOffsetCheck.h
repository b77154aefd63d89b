// KernelOffsetCheck: which task_struct offsets PyPerf samples with.
//
// The BPF program finds a thread's PyThreadState through task->thread.fsbase
// and its user registers (in kernel mode) above task->stack. gProfiler passes
// both offsets with --fs-offset and --stack-offset from its own helpers, and
// a wrong value would leave every Python stack empty without a word. So at
// start-up each candidate pair (the flags, BTF's values) is checked against
// the running kernel: PyPerf samples its own thread with the BPF program's
// check_kernel_offsets, and the fsbase read must equal arch_prctl(ARCH_GET_FS)
// while the user registers saved above task->stack must equal the ones perf
// reports on user-mode samples. Flags that pass are used; flags that fail
// give way to BTF's values with one warning; nothing passing is an error.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "PyPerfBpf.h"
#include "PyPerfBpfShared.h"
#include "btf_offsets.h"
#include "status.h"

namespace ebpf::pyperf {

// --fs-offset and --stack-offset, as given.
struct KernelOffsetFlags {
  std::optional<uint64_t> fs_offset;
  std::optional<uint64_t> stack_offset;
};

// How one candidate pair fared against the running kernel.
struct OffsetVerdict {
  enum class Outcome { kPass, kFail, kInconclusive };
  Outcome outcome = Outcome::kInconclusive;
  uint64_t regs_offset = 0;  // kPass: where the saved user registers are, from task->stack
  std::string why;           // kFail, kInconclusive: what was seen
};

// One run of the check over all candidates.
struct OffsetCheckRun {
  std::vector<OffsetVerdict> verdicts;  // one per candidate, in order
  uint64_t samples = 0;                 // of the checking thread
  uint64_t user_samples = 0;            // of them, in user mode
  std::chrono::microseconds elapsed{0};
};

// Checks candidate pairs (at most PYPERF_CHECK_CANDIDATES) against the
// running kernel. An error is fatal (the check could not be set up); a check
// that cannot sample gives inconclusive verdicts.
using OffsetChecker = std::function<Result<OffsetCheckRun>(const std::vector<KernelOffsets>&)>;

// Where the saved user registers may be, from task->stack, in the order
// tried: x86_64 kernel stacks of 16 KiB (32 KiB with KASAN), with or without
// the 16 bytes FRED keeps above them.
std::array<uint64_t, PYPERF_CHECK_REGS_LAYOUTS> CandidateRegsOffsets();

// The verdict on `candidate` from what check_kernel_offsets saw with `input`.
OffsetVerdict JudgeOffsetCheck(const KernelOffsets& candidate,
                               const pyperf_offset_check_input& input,
                               const pyperf_offset_check_result& seen);

// Samples the calling thread with `bpf`'s check program (see OffsetChecker).
Result<OffsetCheckRun> CheckKernelOffsets(PyPerfBpf& bpf,
                                          const std::vector<KernelOffsets>& candidates,
                                          const OffsetCheckSampling& sampling = {});

struct KernelOffsetChoice {
  pyperf_kernel_offsets offsets = {};
  std::string warning;  // empty, or one line for stderr (without "PyPerf: warning: ")
  std::string summary;  // what was used and how it was checked, for the log
};

// The offsets to sample with, given the flags, BTF's values (or why there
// are none) and a checker; an error (one line) names the flags.
Result<KernelOffsetChoice> ChooseKernelOffsets(const KernelOffsetFlags& flags,
                                               const Result<KernelOffsets>& btf,
                                               const OffsetChecker& check);

}  // namespace ebpf::pyperf
