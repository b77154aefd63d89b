// The start-up check of the task_struct offsets (KernelOffsetCheck): the
// verdict on what the BPF check program saw, the choice between the flags
// and BTF's values with the lines a user reads, and the check itself against
// the running kernel (right values pass, wrong ones fail, in well under
// 100 ms).
#include <iostream>

#include "KernelOffsetCheck.h"
#include "PyPerfBpf.h"
#include "PyPerfProfiler.h"
#include "btf_offsets.h"
#include "support/test_support.h"

namespace {

using ebpf::pyperf::ChooseKernelOffsets;
using ebpf::pyperf::KernelOffsetFlags;
using ebpf::KernelOffsets;
using ebpf::pyperf::OffsetCheckRun;
using ebpf::pyperf::OffsetVerdict;
using Outcome = ebpf::pyperf::OffsetVerdict::Outcome;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// ---- Verdicts from what check_kernel_offsets saw.

pyperf_offset_check_input Input() {
  pyperf_offset_check_input input = {};
  auto regs = ebpf::pyperf::CandidateRegsOffsets();
  for (int l = 0; l < PYPERF_CHECK_REGS_LAYOUTS; ++l) input.regs_offsets[l] = regs[l];
  input.fsbase = 0x7f0000001740;
  input.candidate_count = 1;
  return input;
}

pyperf_offset_check_result AllMatching(int layout) {
  pyperf_offset_check_result seen = {};
  seen.samples = seen.fsbase_matches = 10;
  seen.user_samples = seen.regs_matches[layout] = 8;
  seen.fsbase = 0x7f0000001740;
  return seen;
}

TEST(JudgeOffsetCheck, PassesWhenEverySampleMatchesAndFindsTheRegisters) {
  auto regs = ebpf::pyperf::CandidateRegsOffsets();
  EXPECT_EQ(regs[0], 16384u - 168u);
  EXPECT_EQ(regs[1], 16384u - 16u - 168u);  // FRED
  OffsetVerdict plain = ebpf::pyperf::JudgeOffsetCheck({2936, 32}, Input(), AllMatching(0));
  EXPECT_EQ(plain.outcome, Outcome::kPass) << plain.why;
  EXPECT_EQ(plain.regs_offset, regs[0]);
  OffsetVerdict fred = ebpf::pyperf::JudgeOffsetCheck({2936, 32}, Input(), AllMatching(1));
  EXPECT_EQ(fred.outcome, Outcome::kPass) << fred.why;
  EXPECT_EQ(fred.regs_offset, regs[1]);
}

TEST(JudgeOffsetCheck, FailsOnAFsbaseMismatchAndSaysWhatWasRead) {
  pyperf_offset_check_result seen = AllMatching(0);
  seen.fsbase_matches = 0;
  seen.fsbase = 0xffff888000000000;
  OffsetVerdict v = ebpf::pyperf::JudgeOffsetCheck({24, 32}, Input(), seen);
  EXPECT_EQ(v.outcome, Outcome::kFail);
  EXPECT_TRUE(Contains(v.why, "task+24")) << v.why;
  EXPECT_TRUE(Contains(v.why, "0xffff888000000000")) << v.why;
  EXPECT_TRUE(Contains(v.why, "0x7f0000001740")) << v.why;
}

TEST(JudgeOffsetCheck, FailsWhenTheSavedRegistersDifferFromPerfs) {
  pyperf_offset_check_result seen = AllMatching(0);
  seen.regs_matches[0] = 7;  // one user-mode sample did not match
  OffsetVerdict v = ebpf::pyperf::JudgeOffsetCheck({2936, 40}, Input(), seen);
  EXPECT_EQ(v.outcome, Outcome::kFail);
  EXPECT_TRUE(Contains(v.why, "task+40")) << v.why;
}

TEST(JudgeOffsetCheck, IsInconclusiveWithoutUserModeSamples) {
  pyperf_offset_check_result none = {};
  EXPECT_EQ(ebpf::pyperf::JudgeOffsetCheck({2936, 32}, Input(), none).outcome, Outcome::kInconclusive);
  pyperf_offset_check_result kernel_only = AllMatching(0);
  kernel_only.user_samples = 0;
  kernel_only.regs_matches[0] = 0;
  EXPECT_EQ(ebpf::pyperf::JudgeOffsetCheck({2936, 32}, Input(), kernel_only).outcome,
            Outcome::kInconclusive);
  // A wrong fsbase is wrong whatever mode the samples hit.
  kernel_only.fsbase_matches = 0;
  EXPECT_EQ(ebpf::pyperf::JudgeOffsetCheck({2936, 32}, Input(), kernel_only).outcome, Outcome::kFail);
}

// ---- The choice, with a checker that knows the right pair.

constexpr KernelOffsets kRight = {2936, 32};

// Passes exactly the pairs equal to `right`; records what it was asked.
struct FakeChecker {
  KernelOffsets right = kRight;
  Outcome otherwise = Outcome::kFail;
  std::vector<KernelOffsets> asked;

  ebpf::pyperf::OffsetChecker Get() {
    return [this](const std::vector<KernelOffsets>& candidates) -> ebpf::Result<OffsetCheckRun> {
      asked = candidates;
      OffsetCheckRun run;
      for (const auto& c : candidates) {
        OffsetVerdict v;
        bool pass = c.fs_base == right.fs_base && c.stack == right.stack;
        v.outcome = pass ? Outcome::kPass : otherwise;
        v.regs_offset = pass ? 16216 : 0;
        v.why = pass ? "" : "the fsbase at task+" + std::to_string(c.fs_base) + " is wrong";
        run.verdicts.push_back(v);
      }
      return run;
    };
  }
};

KernelOffsetFlags Flags(std::optional<uint64_t> fs, std::optional<uint64_t> stack) {
  KernelOffsetFlags flags;
  flags.fs_offset = fs;
  flags.stack_offset = stack;
  return flags;
}

// Checks that `choice` samples with the fs and stack offsets of `expected`.
void ExpectChosen(const ebpf::pyperf::KernelOffsetChoice& choice, const KernelOffsets& expected) {
  EXPECT_EQ(choice.offsets.fs_offset, expected.fs_base);
  EXPECT_EQ(choice.offsets.stack_offset, expected.stack);
}

const ebpf::Result<KernelOffsets> kBtf = KernelOffsets(kRight);
const ebpf::Result<KernelOffsets> kNoBtf = ebpf::Status::Error(
    std::string("BTF file /sys/kernel/btf/vmlinux is empty") + ebpf::kKernelOffsetFlagsHint);

TEST(ChooseKernelOffsets, RightFlagsAreUsedSilently) {
  FakeChecker checker;
  auto choice = ChooseKernelOffsets(Flags(2936, 32), kNoBtf, checker.Get());
  ASSERT_TRUE(choice.ok()) << choice.error();
  ExpectChosen(*choice, kRight);
  EXPECT_EQ(choice->offsets.regs_offset, 16216u);
  EXPECT_EQ(choice->warning, "");
  ASSERT_EQ(checker.asked.size(), 1u);  // BTF is absent: one candidate
}

TEST(ChooseKernelOffsets, FlagsEqualToBtfAreCheckedOnce) {
  FakeChecker checker;
  auto choice = ChooseKernelOffsets(Flags(2936, 32), kBtf, checker.Get());
  ASSERT_TRUE(choice.ok()) << choice.error();
  EXPECT_EQ(choice->warning, "");
  EXPECT_EQ(checker.asked.size(), 1u);
}

TEST(ChooseKernelOffsets, WrongFlagsGiveWayToBtfWithOneWarningNamingBoth) {
  FakeChecker checker;
  auto choice = ChooseKernelOffsets(Flags(32, 32), kBtf, checker.Get());
  ASSERT_TRUE(choice.ok()) << choice.error();
  ExpectChosen(*choice, kRight);
  ASSERT_EQ(checker.asked.size(), 2u);
  EXPECT_EQ(checker.asked[0].fs_base, 32u);
  EXPECT_EQ(checker.asked[1].fs_base, 2936u);
  const std::string& w = choice->warning;
  EXPECT_EQ(w.find('\n'), std::string::npos);
  EXPECT_TRUE(Contains(w, "--fs-offset 32 / --stack-offset 32 fail the check")) << w;
  EXPECT_TRUE(Contains(w, "the fsbase at task+32 is wrong")) << w;
  EXPECT_TRUE(Contains(w, "using BTF's values fs 2936, stack 32")) << w;
}

TEST(ChooseKernelOffsets, OneFlagIsPairedWithBtfsOtherValue) {
  FakeChecker checker;
  auto choice = ChooseKernelOffsets(Flags(std::nullopt, 40), kBtf, checker.Get());
  ASSERT_TRUE(choice.ok()) << choice.error();
  ASSERT_EQ(checker.asked.size(), 2u);
  EXPECT_EQ(checker.asked[0].fs_base, 2936u);
  EXPECT_EQ(checker.asked[0].stack, 40u);
  EXPECT_TRUE(Contains(choice->warning, "--fs-offset 2936 (from BTF) / --stack-offset 40 fail"))
      << choice->warning;
  EXPECT_EQ(choice->offsets.stack_offset, 32u);
}

TEST(ChooseKernelOffsets, NothingPassingIsAnErrorNamingTheFlags) {
  FakeChecker checker;
  auto no_btf = ChooseKernelOffsets(Flags(32, 2936), kNoBtf, checker.Get());
  ASSERT_FALSE(no_btf.ok());
  const std::string& e = no_btf.error();
  EXPECT_TRUE(Contains(e, "--fs-offset 32 / --stack-offset 2936 fail the check")) << e;
  EXPECT_TRUE(Contains(e, "BTF file /sys/kernel/btf/vmlinux is empty")) << e;
  EXPECT_FALSE(Contains(e, ebpf::kKernelOffsetFlagsHint)) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos);

  checker.right = {1, 1};  // BTF is wrong too
  auto both = ChooseKernelOffsets(Flags(32, 2936), kBtf, checker.Get());
  ASSERT_FALSE(both.ok());
  EXPECT_TRUE(Contains(both.error(), "--fs-offset 32 / --stack-offset 2936 fail")) << both.error();
  EXPECT_TRUE(Contains(both.error(), "so do BTF's values fs 2936, stack 32")) << both.error();
}

TEST(ChooseKernelOffsets, WithoutFlagsBtfMustPass) {
  FakeChecker checker;
  auto ok = ChooseKernelOffsets(Flags(std::nullopt, std::nullopt), kBtf, checker.Get());
  ASSERT_TRUE(ok.ok()) << ok.error();
  EXPECT_EQ(ok->warning, "");

  checker.right = {1, 1};
  auto bad = ChooseKernelOffsets(Flags(std::nullopt, std::nullopt), kBtf, checker.Get());
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(Contains(bad.error(), "BTF's task_struct offsets (fs 2936, stack 32) fail"))
      << bad.error();
  EXPECT_TRUE(Contains(bad.error(), "--fs-offset") && Contains(bad.error(), "--stack-offset"))
      << bad.error();

  FakeChecker unused;
  auto absent = ChooseKernelOffsets(Flags(std::nullopt, 32), kNoBtf, unused.Get());
  ASSERT_FALSE(absent.ok());
  EXPECT_TRUE(unused.asked.empty()) << "nothing to check without BTF's other value";
  EXPECT_TRUE(Contains(absent.error(), ebpf::kKernelOffsetFlagsHint)) << absent.error();
}

TEST(ChooseKernelOffsets, AnUncheckableKernelIsAWarningNotAnError) {
  FakeChecker checker;
  checker.right = {1, 1};
  checker.otherwise = Outcome::kInconclusive;
  auto choice = ChooseKernelOffsets(Flags(2936, 32), kNoBtf, checker.Get());
  ASSERT_TRUE(choice.ok()) << choice.error();
  EXPECT_EQ(choice->offsets.fs_offset, 2936u);
  EXPECT_TRUE(Contains(choice->warning, "cannot check --fs-offset 2936 / --stack-offset 32"))
      << choice->warning;
}

// ---- Against the running kernel, with PyPerf's own BPF program.

class KernelOffsetCheckBpf : public ::testing::Test {
 protected:
  void SetUp() override {
    PYPERF_REQUIRE_BPF();
    auto btf = ebpf::ReadKernelOffsets();
    ASSERT_TRUE(btf.ok()) << btf.error();
    btf_ = *btf;
    ebpf::pyperf::BpfConfig config = ebpf::pyperf::BpfConfigFor(ebpf::pyperf::Options{});
    config.sample_period_ns = 1000000;
    auto bpf = ebpf::pyperf::PyPerfBpf::Load(config);
    ASSERT_TRUE(bpf.ok()) << bpf.error();
    bpf_ = std::move(*bpf);
  }

  KernelOffsets btf_;
  std::unique_ptr<ebpf::pyperf::PyPerfBpf> bpf_;
};

TEST_F(KernelOffsetCheckBpf, BtfValuesPassAndWrongOnesFailInWellUnder100Ms) {
  // Swapped values are wrong for sure: the fsbase is a user address and
  // task->stack a kernel one.
  const KernelOffsets wrong_fs = {btf_.stack, btf_.stack};
  const KernelOffsets wrong_stack = {btf_.fs_base, btf_.fs_base};
  for (int round = 0; round < 3; ++round) {
    auto right = ebpf::pyperf::CheckKernelOffsets(*bpf_, {btf_, wrong_fs});
    ASSERT_TRUE(right.ok()) << right.error();
    ASSERT_EQ(right->verdicts.size(), 2u);
    EXPECT_EQ(right->verdicts[0].outcome, Outcome::kPass) << right->verdicts[0].why;
    EXPECT_NE(right->verdicts[0].regs_offset, 0u);
    EXPECT_EQ(right->verdicts[1].outcome, Outcome::kFail);
    EXPECT_TRUE(Contains(right->verdicts[1].why, "fsbase")) << right->verdicts[1].why;
    EXPECT_GE(right->user_samples, 1u);

    auto stack = ebpf::pyperf::CheckKernelOffsets(*bpf_, {wrong_stack});
    ASSERT_TRUE(stack.ok()) << stack.error();
    EXPECT_EQ(stack->verdicts[0].outcome, Outcome::kFail);
    EXPECT_TRUE(Contains(stack->verdicts[0].why, "user registers")) << stack->verdicts[0].why;
    std::cout << "[ check ] round " << round << ": " << right->elapsed.count() << " us, "
              << right->samples << " samples (" << right->user_samples
              << " in user mode), user registers at task->stack + "
              << right->verdicts[0].regs_offset << "; wrong stack: " << stack->elapsed.count()
              << " us\n";
  }
}

}  // namespace
