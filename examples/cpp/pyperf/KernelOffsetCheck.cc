// KernelOffsetCheck: see KernelOffsetCheck.h.
#include "KernelOffsetCheck.h"

#include <asm/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>

namespace ebpf::pyperf {
namespace {

constexpr uint64_t kPtRegsSize = 21 * 8;  // x86_64 struct pt_regs
constexpr uint64_t kFredPadding = 16;     // above pt_regs with CONFIG_X86_FRED (6.9+)
// The default when the check cannot tell: 16 KiB stacks, no padding.
constexpr uint64_t kDefaultRegsOffset = 16384 - kPtRegsSize;

std::string Format(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string Format(const char* format, ...) {
  char buf[512];
  va_list args;
  va_start(args, format);
  vsnprintf(buf, sizeof(buf), format, args);
  va_end(args);
  return buf;
}

unsigned long long U(uint64_t v) { return static_cast<unsigned long long>(v); }

bool SamePair(const KernelOffsets& a, const KernelOffsets& b) {
  return a.fs_base == b.fs_base && a.stack == b.stack;
}

// "--fs-offset 2936 / --stack-offset 32", marking a value that came from BTF.
std::string FlagsText(const KernelOffsetFlags& flags, const KernelOffsets& pair) {
  return Format("--fs-offset %llu%s / --stack-offset %llu%s", U(pair.fs_base),
                flags.fs_offset ? "" : " (from BTF)", U(pair.stack),
                flags.stack_offset ? "" : " (from BTF)");
}

std::string BtfText(const KernelOffsets& btf) {
  return Format("BTF's values fs %llu, stack %llu", U(btf.fs_base), U(btf.stack));
}

// ReadKernelOffsets' error without its advice to pass the flags (they were).
std::string WithoutFlagsHint(std::string error) {
  const std::string hint = kKernelOffsetFlagsHint;
  if (error.size() >= hint.size() &&
      error.compare(error.size() - hint.size(), hint.size(), hint) == 0)
    error.resize(error.size() - hint.size());
  return error;
}

constexpr char kFlagsWayOut[] =
    "give this kernel's task_struct offsets (thread.fsbase, stack) with --fs-offset and "
    "--stack-offset";

KernelOffsetChoice Use(const KernelOffsets& pair, const OffsetVerdict& verdict) {
  KernelOffsetChoice choice;
  choice.offsets.fs_offset = pair.fs_base;
  choice.offsets.stack_offset = pair.stack;
  choice.offsets.mm_offset = pair.mm;
  choice.offsets.regs_offset =
      verdict.outcome == OffsetVerdict::Outcome::kPass ? verdict.regs_offset : kDefaultRegsOffset;
  return choice;
}

std::string Summary(const KernelOffsetChoice& choice, const char* source,
                    const OffsetVerdict& verdict, const OffsetCheckRun& run) {
  const char* outcome = verdict.outcome == OffsetVerdict::Outcome::kPass ? "passed" : "unchecked";
  return Format(
      "task_struct offsets: fs %llu, stack %llu, user registers at task->stack + %llu (%s; "
      "%s the check against the running kernel in %.2f ms: %llu samples, %llu in user mode)",
      U(choice.offsets.fs_offset), U(choice.offsets.stack_offset), U(choice.offsets.regs_offset),
      source, outcome, static_cast<double>(run.elapsed.count()) / 1000.0, U(run.samples),
      U(run.user_samples));
}

}  // namespace

std::array<uint64_t, PYPERF_CHECK_REGS_LAYOUTS> CandidateRegsOffsets() {
  return {16384 - kPtRegsSize, 16384 - kFredPadding - kPtRegsSize, 32768 - kPtRegsSize,
          32768 - kFredPadding - kPtRegsSize};
}

OffsetVerdict JudgeOffsetCheck(const KernelOffsets& candidate,
                               const pyperf_offset_check_input& input,
                               const pyperf_offset_check_result& seen) {
  using Outcome = OffsetVerdict::Outcome;
  OffsetVerdict verdict;
  if (seen.samples == 0) {
    verdict.why = "no sample of PyPerf's own thread arrived";
    return verdict;
  }
  std::string problems;
  if (seen.fsbase_matches != seen.samples) {
    problems = Format(
        "the fsbase at task+%llu is 0x%llx, not this thread's 0x%llx, in %llu of %llu samples",
        U(candidate.fs_base), U(seen.fsbase), U(input.fsbase),
        U(seen.samples - seen.fsbase_matches), U(seen.samples));
  }
  if (seen.user_samples > 0) {
    for (int l = 0; l < PYPERF_CHECK_REGS_LAYOUTS && verdict.regs_offset == 0; ++l)
      if (seen.regs_matches[l] == seen.user_samples) verdict.regs_offset = input.regs_offsets[l];
    if (verdict.regs_offset == 0) {
      if (!problems.empty()) problems += "; ";
      problems += Format(
          "the kernel stack at task+%llu is 0x%llx and the user registers saved at its top are "
          "ip 0x%llx, sp 0x%llx, not perf's ip 0x%llx, sp 0x%llx",
          U(candidate.stack), U(seen.stack), U(seen.saved_ip), U(seen.saved_sp), U(seen.user_ip),
          U(seen.user_sp));
    }
  }
  if (!problems.empty()) {
    verdict.outcome = Outcome::kFail;
    verdict.regs_offset = 0;
    verdict.why = problems;
  } else if (seen.user_samples == 0) {
    verdict.why = "no sample of PyPerf's own thread hit user mode";
  } else {
    verdict.outcome = Outcome::kPass;
  }
  return verdict;
}

Result<OffsetCheckRun> CheckKernelOffsets(PyPerfBpf& bpf,
                                          const std::vector<KernelOffsets>& candidates,
                                          const OffsetCheckSampling& sampling) {
  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  if (candidates.empty() || candidates.size() > PYPERF_CHECK_CANDIDATES)
    return Status::Error("the kernel offset check takes 1 to " +
                         std::to_string(PYPERF_CHECK_CANDIDATES) + " candidates");
  pyperf_offset_check_input input = {};
  for (size_t i = 0; i < candidates.size(); ++i) {
    input.candidates[i].fs_offset = candidates[i].fs_base;
    input.candidates[i].stack_offset = candidates[i].stack;
  }
  input.candidate_count = static_cast<uint32_t>(candidates.size());
  auto regs = CandidateRegsOffsets();
  for (int l = 0; l < PYPERF_CHECK_REGS_LAYOUTS; ++l) input.regs_offsets[l] = regs[l];
  unsigned long fsbase = 0;
  if (syscall(SYS_arch_prctl, ARCH_GET_FS, &fsbase) != 0)
    return Status::Error("arch_prctl(ARCH_GET_FS) failed");
  input.fsbase = fsbase;
  input.tid = static_cast<uint32_t>(syscall(SYS_gettid));

  OffsetCheckRun run;
  auto seen = bpf.SampleOffsetCheck(input, sampling);
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (!seen.ok()) {
      OffsetVerdict verdict;
      verdict.why = seen.error();
      run.verdicts.push_back(verdict);
      continue;
    }
    run.verdicts.push_back(JudgeOffsetCheck(candidates[i], input, (*seen)[i]));
  }
  if (seen.ok()) {
    run.samples = (*seen)[0].samples;
    run.user_samples = (*seen)[0].user_samples;
  }
  run.elapsed = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start);
  return run;
}

Result<KernelOffsetChoice> ChooseKernelOffsets(const KernelOffsetFlags& flags,
                                               const Result<KernelOffsets>& btf,
                                               const OffsetChecker& check) {
  using Outcome = OffsetVerdict::Outcome;
  const bool any_flag = flags.fs_offset || flags.stack_offset;
  const bool both_flags = flags.fs_offset && flags.stack_offset;
  // A value neither given nor in BTF: nothing to check.
  if (!both_flags && !btf.ok()) return btf.status();

  std::vector<KernelOffsets> candidates;
  KernelOffsets given;
  if (any_flag) {
    given.fs_base = flags.fs_offset ? *flags.fs_offset : btf->fs_base;
    given.stack = flags.stack_offset ? *flags.stack_offset : btf->stack;
    if (btf.ok()) given.mm = btf->mm;
    candidates.push_back(given);
  }
  const bool btf_candidate = btf.ok() && (!any_flag || !SamePair(given, *btf));
  if (btf_candidate) candidates.push_back(*btf);

  auto run = check(candidates);
  if (!run.ok()) return run.status();
  if (run->verdicts.size() != candidates.size())
    return Status::Error("the kernel offset check gave no verdict");
  const OffsetVerdict& first = run->verdicts[0];

  if (!any_flag) {
    const KernelOffsets& pair = *btf;
    if (first.outcome == Outcome::kFail)
      return Status::Error("BTF's task_struct offsets (fs " + std::to_string(pair.fs_base) +
                           ", stack " + std::to_string(pair.stack) +
                           ") fail the check against the running kernel (" + first.why +
                           "); pass this kernel's values with --fs-offset and --stack-offset");
    KernelOffsetChoice choice = Use(pair, first);
    if (first.outcome == Outcome::kInconclusive)
      choice.warning = "cannot check " + BtfText(pair) + " against the running kernel (" +
                       first.why + "); using them unchecked";
    choice.summary = Summary(choice, "from BTF", first, *run);
    return choice;
  }

  const std::string flags_text = FlagsText(flags, given);
  if (first.outcome != Outcome::kFail) {
    KernelOffsetChoice choice = Use(given, first);
    if (first.outcome == Outcome::kInconclusive)
      choice.warning = "cannot check " + flags_text + " against the running kernel (" + first.why +
                       "); using them unchecked";
    choice.summary = Summary(choice, "from the command line", first, *run);
    return choice;
  }
  const std::string failed =
      flags_text + " fail the check against the running kernel (" + first.why + ")";
  if (!btf.ok())
    return Status::Error(failed + " and BTF gives no others (" + WithoutFlagsHint(btf.error()) +
                         "): " + kFlagsWayOut);
  if (!btf_candidate)
    return Status::Error(failed + ", and they are BTF's values too: " + kFlagsWayOut);
  const OffsetVerdict& second = run->verdicts[1];
  if (second.outcome == Outcome::kFail)
    return Status::Error(failed + ", and so do " + BtfText(*btf) + " (" + second.why +
                         "): " + kFlagsWayOut);
  KernelOffsetChoice choice = Use(*btf, second);
  choice.warning = failed + "; using " + BtfText(*btf);
  if (second.outcome == Outcome::kInconclusive)
    choice.warning += " (not fully checked: " + second.why + ")";
  choice.summary = Summary(choice, "from BTF, the flags failed", second, *run);
  return choice;
}

}  // namespace ebpf::pyperf
