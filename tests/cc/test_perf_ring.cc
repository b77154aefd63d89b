// PerfRingReader on a ring laid out in ordinary memory as the kernel lays out
// a perf mapping (a metadata page, then the data area): records are written
// here as perf_event_output writes them, including ones that wrap around the
// end of the data area, and the reader must hand each one over whole, in
// order, 8-byte aligned, and give the space back.
#include <gtest/gtest.h>
#include <linux/perf_event.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "perf_ring.h"

namespace {

constexpr size_t kPageSize = 4096;
constexpr size_t kDataSize = 4096;

// Memory shaped like a mapped perf ring, and a writer that plays the kernel.
class FakeRing {
 public:
  FakeRing() : memory_((kPageSize + kDataSize) / sizeof(uint64_t)) {}
  void* base() { return memory_.data(); }
  perf_event_mmap_page* page() { return reinterpret_cast<perf_event_mmap_page*>(memory_.data()); }

  // Appends a PERF_RECORD_SAMPLE holding `payload` (padded as the kernel
  // pads raw data, so the record is a multiple of 8 bytes).
  void AddSample(const std::vector<uint8_t>& payload) {
    uint32_t raw_size = static_cast<uint32_t>((payload.size() + 4 + 7) / 8 * 8 - 4);
    perf_event_header header{PERF_RECORD_SAMPLE, 0,
                             static_cast<uint16_t>(sizeof(perf_event_header) + 4 + raw_size)};
    std::vector<uint8_t> bytes(header.size, 0);
    std::memcpy(bytes.data(), &header, sizeof(header));
    std::memcpy(bytes.data() + sizeof(header), &raw_size, 4);
    std::memcpy(bytes.data() + sizeof(header) + 4, payload.data(), payload.size());
    Append(bytes);
  }
  void AddLost(uint64_t lost) {
    perf_event_header header{PERF_RECORD_LOST, 0, sizeof(perf_event_header) + 16};
    std::vector<uint8_t> bytes(header.size, 0);
    std::memcpy(bytes.data(), &header, sizeof(header));
    std::memcpy(bytes.data() + sizeof(header) + 8, &lost, 8);
    Append(bytes);
  }
  void AddOther(uint16_t size) {
    perf_event_header header{PERF_RECORD_THROTTLE, 0, size};
    std::vector<uint8_t> bytes(size, 0xEE);
    std::memcpy(bytes.data(), &header, sizeof(header));
    Append(bytes);
  }
  uint64_t free_bytes() { return kDataSize - (head_ - page()->data_tail); }
  uint64_t head() const { return head_; }

 private:
  void Append(const std::vector<uint8_t>& bytes) {
    ASSERT_LE(bytes.size(), free_bytes()) << "the test wrote over unread records";
    uint8_t* data = reinterpret_cast<uint8_t*>(memory_.data()) + kPageSize;
    for (size_t i = 0; i < bytes.size(); ++i) data[(head_ + i) % kDataSize] = bytes[i];
    head_ += bytes.size();
    __atomic_store_n(&page()->data_head, head_, __ATOMIC_RELEASE);
  }

  std::vector<uint64_t> memory_;
  uint64_t head_ = 0;
};

struct Seen {
  std::vector<std::vector<uint8_t>> samples;
  std::vector<int> raw_sizes;
  uint64_t lost = 0;
  bool aligned = true;
};

void OnRecord(void* cookie, void* data, int size) {
  auto* seen = static_cast<Seen*>(cookie);
  if (reinterpret_cast<uintptr_t>(data) % 8 != 0) seen->aligned = false;
  auto* bytes = static_cast<const uint8_t*>(data);
  seen->samples.emplace_back(bytes, bytes + size);
  seen->raw_sizes.push_back(size);
}

void OnLost(void* cookie, uint64_t lost) { static_cast<Seen*>(cookie)->lost += lost; }

std::vector<uint8_t> Payload(uint32_t seq, size_t size) {
  std::vector<uint8_t> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<uint8_t>(seq * 31 + i * 7);
  return bytes;
}

TEST(PerfRingReader, HandsOverEveryRecordWholeInOrderAcrossTheRingEnd) {
  FakeRing ring;
  ebpf::PerfRingReader reader(ring.base(), kPageSize, kDataSize);
  Seen seen;
  const ebpf::PerfRingCallbacks callbacks{&OnRecord, &OnLost, &seen};
  std::vector<std::vector<uint8_t>> sent;
  size_t wrapped = 0;
  for (uint32_t seq = 0; seq < 500; ++seq) {
    const size_t size = 1 + (seq * 173) % 1500;  // odd sizes too: padded by the writer
    const size_t record = 8 + (size + 4 + 7) / 8 * 8;
    if (ring.free_bytes() < record) {
      EXPECT_GT(reader.Drain(callbacks), 0u);
      EXPECT_EQ(ring.page()->data_tail, ring.head()) << "space not given back";
    }
    if (ring.head() % kDataSize + record > kDataSize) ++wrapped;
    sent.push_back(Payload(seq, size));
    ring.AddSample(sent.back());
  }
  reader.Drain(callbacks);
  EXPECT_GT(wrapped, 20u) << "the test should wrap records around the end";
  ASSERT_EQ(seen.samples.size(), sent.size());
  for (size_t i = 0; i < sent.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(static_cast<size_t>(seen.raw_sizes[i]) % 8, 4u);  // padded as the kernel pads
    ASSERT_GE(seen.samples[i].size(), sent[i].size());
    EXPECT_TRUE(std::equal(sent[i].begin(), sent[i].end(), seen.samples[i].begin()));
  }
  EXPECT_TRUE(seen.aligned) << "a record's data was not 8-byte aligned";
  EXPECT_EQ(seen.lost, 0u);
}

TEST(PerfRingReader, CountsLostRecordsAndSkipsOtherTypes) {
  FakeRing ring;
  ebpf::PerfRingReader reader(ring.base(), kPageSize, kDataSize);
  Seen seen;
  const ebpf::PerfRingCallbacks callbacks{&OnRecord, &OnLost, &seen};
  ring.AddSample(Payload(1, 100));
  ring.AddLost(7);
  ring.AddOther(24);
  ring.AddSample(Payload(2, 40));
  ring.AddLost(5);
  EXPECT_EQ(reader.Drain(callbacks), 5u);
  ASSERT_EQ(seen.samples.size(), 2u);
  EXPECT_EQ(seen.samples[0][0], Payload(1, 1)[0]);
  EXPECT_EQ(seen.samples[1][0], Payload(2, 1)[0]);
  EXPECT_EQ(seen.lost, 12u);
  EXPECT_EQ(ring.page()->data_tail, ring.head());
  EXPECT_EQ(reader.Drain(callbacks), 0u) << "an empty ring has nothing to read";
}

TEST(PerfRingReader, GivesBackARingItCannotParseRatherThanLoop) {
  FakeRing ring;
  ebpf::PerfRingReader reader(ring.base(), kPageSize, kDataSize);
  Seen seen;
  ring.AddOther(8);
  ring.AddOther(16);
  // The second record's header claims more bytes than were written.
  perf_event_header bad{PERF_RECORD_SAMPLE, 0, 4000};
  std::memcpy(static_cast<uint8_t*>(ring.base()) + kPageSize + 8, &bad, sizeof(bad));
  reader.Drain({&OnRecord, &OnLost, &seen});
  EXPECT_EQ(ring.page()->data_tail, ring.head());
  EXPECT_TRUE(seen.samples.empty());
}

}  // namespace
