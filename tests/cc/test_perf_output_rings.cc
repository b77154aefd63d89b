// PerfOutputRings with a real BPF program: a raw-tracepoint program that
// perf_submits a record of the size user space asks for, run on a chosen CPU
// with BPF_PROG_TEST_RUN (one run, one record, so every record is known).
// Every record must arrive whole and in order on its CPU's ring, through
// small rings that records wrap around; a full ring must report what it
// lost; a ring must wake Poll once its watermark of bytes is crossed, and
// not before.
#include <bpf/bpf.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "bpf_loader.h"
#include "perf_output_rings.h"
#include "support/test_support.h"

namespace {

constexpr int kRawTracepointProgram = 17;  // BPF_PROG_TYPE_RAW_TRACEPOINT
constexpr size_t kMaxRecord = 2047;

// Record seq: [0] seq, [1] its size in bytes, then words seq * K + i; the
// record is the first `size` bytes of that.
const char* const kProgram = R"(
#include <uapi/linux/bpf.h>
struct record_words { u64 words[256]; };
BPF_PERCPU_ARRAY(scratch, struct record_words, 1);
BPF_PERF_OUTPUT(events);
int emit(struct bpf_raw_tracepoint_args *ctx) {
  u64 seq = ctx->args[0];
  u64 size = ctx->args[1];
  u32 zero = 0;
  struct record_words *record = scratch.lookup(&zero);
  if (!record) return 1;
  record->words[0] = seq;
  record->words[1] = size;
#pragma unroll
  for (int i = 2; i < 256; i++) record->words[i] = seq * 0x9E3779B97F4A7C15ull + i;
  size &= 2047;
  return events.perf_submit(ctx, record, size);
}
)";

uint64_t Word(uint64_t seq, size_t i) {
  if (i == 0) return seq;
  return seq * 0x9E3779B97F4A7C15ull + i;
}

struct Received {
  std::map<int, std::vector<uint64_t>> seqs_by_cpu;  // filled by the test after each poll
  std::vector<uint64_t> seqs;                        // since the last poll
  uint64_t lost = 0;
  size_t bad = 0;  // misaligned, short, or bytes that are not the record's
  std::string first_problem;
};

void OnRecord(void* cookie, void* data, int size) {
  auto* got = static_cast<Received*>(cookie);
  auto fail = [&](const std::string& why) {
    if (got->bad++ == 0) got->first_problem = why;
  };
  if (reinterpret_cast<uintptr_t>(data) % 8 != 0) fail("data not 8-byte aligned");
  if (size < 16) return fail("a record of " + std::to_string(size) + " bytes");
  const auto* bytes = static_cast<const uint8_t*>(data);
  uint64_t seq, want;
  std::memcpy(&seq, bytes, 8);
  std::memcpy(&want, bytes + 8, 8);
  // The kernel pads raw data so that its size word and it fill 8-byte units.
  if (static_cast<uint64_t>(size) != (want + 4 + 7) / 8 * 8 - 4)
    fail("record " + std::to_string(seq) + ": " + std::to_string(size) + " bytes for " +
         std::to_string(want));
  for (size_t i = 2; i * 8 < want && i * 8 < static_cast<size_t>(size); ++i) {
    uint64_t word = Word(seq, i);
    size_t n = std::min<size_t>(8, want - i * 8);
    if (std::memcmp(bytes + i * 8, &word, n) != 0) {
      fail("record " + std::to_string(seq) + ": word " + std::to_string(i) + " differs");
      break;
    }
  }
  got->seqs.push_back(seq);
}

void OnLost(void* cookie, uint64_t lost) { static_cast<Received*>(cookie)->lost += lost; }

class PerfOutputRingsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PYPERF_REQUIRE_BPF();
    auto bpf = ebpf::CompileBpfProgram(kProgram, {});
    ASSERT_TRUE(bpf.ok()) << bpf.error();
    bpf_ = std::move(*bpf);
    auto st = ebpf::LoadBpfFunction(*bpf_, "emit", kRawTracepointProgram, &prog_fd_);
    ASSERT_TRUE(st.ok()) << st.message();
    auto cpus = ebpf::OnlineCpus();
    ASSERT_TRUE(cpus.ok()) << cpus.error();
    cpus_ = *cpus;
  }
  void TearDown() override { rings_.reset(); }  // before bpf_, whose map holds the rings

  void OpenRings(int pages, size_t wakeup_bytes) {
    ebpf::PerfOutputRings::Options options;
    options.map_fd = bpf_->get_table("events").get_fd();
    options.pages_per_cpu = pages;
    options.wakeup_bytes = wakeup_bytes;
    options.on_record = &OnRecord;
    options.on_lost = &OnLost;
    options.cookie = &got_;
    auto rings = ebpf::PerfOutputRings::Open(options);
    ASSERT_TRUE(rings.ok()) << rings.error();
    rings_ = std::move(*rings);
  }

  // Runs the program once on `cpu`; its return value (0: the record went in).
  int Emit(int cpu, uint64_t seq, uint64_t size) {
    uint64_t args[2] = {seq, size};
    bpf_test_run_opts opts{};
    opts.sz = sizeof(opts);
    opts.ctx_in = args;
    opts.ctx_size_in = sizeof(args);
    opts.flags = BPF_F_TEST_RUN_ON_CPU;
    opts.cpu = static_cast<uint32_t>(cpu);
    int err = bpf_prog_test_run_opts(prog_fd_, &opts);
    EXPECT_EQ(err, 0) << "BPF_PROG_TEST_RUN on CPU " << cpu << ": " << strerror(errno);
    return static_cast<int>(opts.retval);
  }

  // Polls without waiting and files what arrived under `cpu`.
  void Drain(int cpu) {
    rings_->Poll(0);
    auto& seqs = got_.seqs_by_cpu[cpu];
    seqs.insert(seqs.end(), got_.seqs.begin(), got_.seqs.end());
    got_.seqs.clear();
  }

  std::unique_ptr<ebpf::BPF> bpf_;
  int prog_fd_ = -1;  // owned by bpf_
  std::vector<int> cpus_;
  std::unique_ptr<ebpf::PerfOutputRings> rings_;
  Received got_;
};

TEST_F(PerfOutputRingsTest, EveryRecordArrivesWholeAndInOrderThroughASmallRing) {
  OpenRings(2, 0);  // 8 KiB of records a CPU: most of the records below wrap it
  constexpr uint64_t kRecords = 600;
  size_t wrapped = 0;
  for (int cpu : cpus_) {
    uint64_t written = 0;  // where the kernel writes next: this ring is new
    for (uint64_t seq = 0; seq < kRecords; ++seq) {
      const uint64_t size = 16 + (seq * 181) % (kMaxRecord - 15);  // 16 .. 2047 bytes
      const uint64_t record = 8 + (size + 4 + 7) / 8 * 8;
      if (written % 8192 + record > 8192) ++wrapped;
      written += record;
      ASSERT_EQ(Emit(cpu, seq, size), 0) << "record " << seq << " on CPU " << cpu;
      if (seq % 3 == 2) Drain(cpu);  // 3 records of at most ~2 KiB fit the ring
    }
    Drain(cpu);
  }
  EXPECT_EQ(got_.bad, 0u) << got_.first_problem;
  EXPECT_EQ(got_.lost, 0u);
  EXPECT_GT(wrapped, 10u * cpus_.size()) << "records should have wrapped around the ring's end";
  for (int cpu : cpus_) {
    const auto& seqs = got_.seqs_by_cpu[cpu];
    ASSERT_EQ(seqs.size(), kRecords) << "CPU " << cpu;
    for (uint64_t seq = 0; seq < kRecords; ++seq)
      ASSERT_EQ(seqs[seq], seq) << "CPU " << cpu << ": out of order or missing";
  }
}

TEST_F(PerfOutputRingsTest, AFullRingReportsTheRecordsItLost) {
  OpenRings(2, 0);
  const int cpu = cpus_.back();
  uint64_t accepted = 0, refused = 0;
  for (uint64_t seq = 0; seq < 40; ++seq) {  // 40 KiB into 8 KiB, unread
    if (Emit(cpu, seq, 1000) == 0) {
      EXPECT_EQ(refused, 0u) << "a record went in after one was lost";
      ++accepted;
    } else {
      ++refused;
    }
  }
  ASSERT_GT(refused, 0u);
  Drain(cpu);
  ASSERT_EQ(got_.seqs_by_cpu[cpu].size(), accepted);
  for (uint64_t seq = 0; seq < accepted; ++seq) EXPECT_EQ(got_.seqs_by_cpu[cpu][seq], seq);
  // The kernel reports the loss with the next record that fits.
  ASSERT_EQ(Emit(cpu, 40, 1000), 0);
  Drain(cpu);
  EXPECT_EQ(got_.lost, refused);
  EXPECT_EQ(got_.seqs_by_cpu[cpu].back(), 40u);
  EXPECT_EQ(got_.bad, 0u) << got_.first_problem;
}

TEST_F(PerfOutputRingsTest, ARingWakesPollOnceItsWatermarkIsCrossed) {
  OpenRings(4, 4096);
  const int cpu = cpus_.front();
  for (uint64_t seq = 0; seq < 3; ++seq) ASSERT_EQ(Emit(cpu, seq, 1000), 0);  // ~3 KiB
  EXPECT_EQ(rings_->Poll(200), 0) << "woke below the watermark";
  EXPECT_EQ(rings_->wakeups(), 0u);
  EXPECT_EQ(got_.seqs.size(), 3u) << "a poll that timed out still reads every ring";
  got_.seqs.clear();
  for (uint64_t seq = 3; seq < 6; ++seq) ASSERT_EQ(Emit(cpu, seq, 1000), 0);  // past 4 KiB
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(rings_->Poll(20000), 1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(rings_->wakeups(), 1u);
  EXPECT_EQ(got_.seqs.size(), 3u);
  EXPECT_EQ(got_.bad, 0u) << got_.first_problem;
}

}  // namespace
