// PyPerf's kernel stacks live in two BPF maps that take turns by generation.
// With the real BPF program sampling a real process (dd copying /dev/zero to
// /dev/null: nearly all its time in read and write system calls):
//  - every event carries the generation it was taken in, never a later one;
//  - events of a generation stay readable after the next one starts: the
//    change empties only the map of the generation before, so the events in
//    flight while PyPerf changes generation keep their kernel frames (one map
//    emptied under them lost every such event);
//  - the change to generation g + 2 frees the stacks of generation g, and
//    generation g + 1's events are still readable then.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "KernelOffsetCheck.h"
#include "PyPerfBpf.h"
#include "PyPerfProfiler.h"
#include "btf_offsets.h"
#include "support/test_support.h"

namespace {

using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

// Events of one generation with a kernel stack that the test holds unread
// across generation changes.
constexpr size_t kHeldPerGeneration = 40;
constexpr auto kDeadline = seconds(60);
// x86_64 kernel addresses are in the upper half.
constexpr uint64_t kKernelSpaceStart = 0xffff800000000000ull;

struct Taken {
  uint32_t generation = 0;
  int32_t stack_id = -1;
};

class KernelStackGenerations : public ::testing::Test {
 protected:
  void SetUp() override {
    PYPERF_REQUIRE_BPF();
    dd_ = std::make_unique<pyperf_test::ChildProcess>(
        std::vector<std::string>{"dd", "if=/dev/zero", "of=/dev/null", "bs=65536", "status=none"});
    ASSERT_TRUE(dd_->Running());

    ebpf::pyperf::BpfConfig config = ebpf::pyperf::BpfConfigFor(ebpf::pyperf::Options{});
    config.sample_frequency = 0;
    config.sample_period_ns = 1000000;
    auto bpf = ebpf::pyperf::PyPerfBpf::Load(config);
    ASSERT_TRUE(bpf.ok()) << bpf.error();
    bpf_ = std::move(*bpf);
    auto check = [this](const std::vector<ebpf::KernelOffsets>& candidates) {
      return ebpf::pyperf::CheckKernelOffsets(*bpf_, candidates);
    };
    auto offsets = ebpf::pyperf::ChooseKernelOffsets({}, ebpf::ReadKernelOffsets(), check);
    ASSERT_TRUE(offsets.ok()) << offsets.error();
    ASSERT_TRUE(bpf_->SetKernelOffsets(offsets->offsets).ok());
    // Any process the map holds is sampled; dd has no Python state, so its
    // events carry only their kernel stacks (and the error flags).
    ASSERT_TRUE(bpf_->AddProcess(dd_->pid(), pyperf_proc_info{}).ok());
    auto on_event = [this](const pyperf_event& event, size_t) {
      if (event.pid != static_cast<uint32_t>(dd_->pid())) return;
      newest_seen_ = std::max(newest_seen_, event.kernel_stack_generation);
      if (event.kernel_stack_id >= 0)
        taken_.push_back({event.kernel_stack_generation, event.kernel_stack_id});
    };
    ASSERT_TRUE(bpf_->OpenEvents(on_event, [](uint64_t) {}).ok());
    ASSERT_TRUE(bpf_->Attach().ok());
  }

  void TearDown() override {
    if (bpf_) bpf_->Detach();
  }

  // Reads rings until kHeldPerGeneration events of `generation` with a
  // kernel stack are held.
  void CollectGeneration(uint32_t generation) {
    auto deadline = Clock::now() + kDeadline;
    while (Count(generation) < kHeldPerGeneration && Clock::now() < deadline) bpf_->Poll(100);
    ASSERT_GE(Count(generation), kHeldPerGeneration)
        << "dd's samples of generation " << generation << " with a kernel stack, in "
        << kDeadline.count() << " s";
  }

  size_t Count(uint32_t generation) const {
    size_t n = 0;
    for (const Taken& t : taken_) n += t.generation == generation;
    return n;
  }

  // How many held events of `generation` read back a kernel stack; each one
  // read must be kernel addresses only.
  size_t Readable(uint32_t generation) {
    size_t readable = 0;
    std::vector<uint64_t> addrs;
    for (const Taken& t : taken_) {
      if (t.generation != generation) continue;
      if (!bpf_->ReadKernelStack(t.generation, t.stack_id, &addrs)) continue;
      ++readable;
      EXPECT_FALSE(addrs.empty()) << "stack id " << t.stack_id << " read back no frame";
      for (uint64_t a : addrs) EXPECT_GE(a, kKernelSpaceStart) << "stack id " << t.stack_id;
    }
    return readable;
  }

  std::set<int32_t> Ids(uint32_t generation) const {
    std::set<int32_t> ids;
    for (const Taken& t : taken_)
      if (t.generation == generation) ids.insert(t.stack_id);
    return ids;
  }

  std::unique_ptr<pyperf_test::ChildProcess> dd_;
  std::unique_ptr<ebpf::pyperf::PyPerfBpf> bpf_;
  std::vector<Taken> taken_;
  uint32_t newest_seen_ = 0;
};

TEST_F(KernelStackGenerations, EventsOfTheGenerationBeforeKeepTheirStacks) {
  ASSERT_NO_FATAL_FAILURE(CollectGeneration(0));
  EXPECT_EQ(Readable(0), Count(0)) << "generation 0's events before any change";

  // Generation 1 starts with generation 0's events held, unread: they are
  // still readable after it, and so are the ones in flight during it.
  auto freed = bpf_->StartKernelStackGeneration(1);
  ASSERT_TRUE(freed.ok()) << freed.error();
  EXPECT_EQ(*freed, 0u) << "generation 1's map held stacks before generation 1";
  ASSERT_NO_FATAL_FAILURE(CollectGeneration(1));
  EXPECT_EQ(Readable(0), Count(0)) << "generation 0's events once generation 1 started";
  EXPECT_EQ(Readable(1), Count(1));
  EXPECT_LE(newest_seen_, 1u);

  // Generation 2 takes generation 0's map: its stacks are freed (each id
  // generation 0's events named was held), generation 1's stay readable.
  const size_t ids_of_0 = Ids(0).size();
  freed = bpf_->StartKernelStackGeneration(2);
  ASSERT_TRUE(freed.ok()) << freed.error();
  EXPECT_GE(*freed, ids_of_0) << "generation 0's distinct stack ids";
  ASSERT_NO_FATAL_FAILURE(CollectGeneration(2));
  EXPECT_EQ(Readable(1), Count(1)) << "generation 1's events once generation 2 started";
  EXPECT_EQ(Readable(2), Count(2));
  EXPECT_LE(newest_seen_, 2u);
  std::cout << "[ generations ] held " << Count(0) << ", " << Count(1) << ", " << Count(2)
            << " events of generations 0, 1, 2 (" << ids_of_0 << " distinct ids in 0, " << *freed
            << " stacks freed when 2 started)" << std::endl;
}

}  // namespace
