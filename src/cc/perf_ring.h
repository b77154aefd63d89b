// PerfRingReader: reads the records of one mapped perf ring (a perf event's
// metadata page followed by its 2^n data pages), as a BPF program's
// perf_event_output writes them, with memory accesses only: no system call
// per read. The kernel publishes data_head (read here with acquire ordering)
// and we hand space back by storing data_tail (with release ordering), as the
// kernel's perf ABI (include/uapi/linux/perf_event.h) lays out.
//
// Raw samples (PERF_RECORD_SAMPLE of PERF_SAMPLE_RAW) reach the callback
// copied to an 8-byte aligned scratch buffer owned by the reader, reused for
// every record: a record that wraps around the end of the data area arrives
// whole, and no record costs an allocation. Lost-record notices reach
// on_lost with their count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

struct perf_event_mmap_page;

namespace ebpf {

// A raw sample: `data` (8-byte aligned) holds `size` bytes, valid only
// during the call.
using PerfRawCallback = void (*)(void* cookie, void* data, int size);
// `lost` records the kernel could not write for want of room.
using PerfLostCallback = void (*)(void* cookie, uint64_t lost);

struct PerfRingCallbacks {
  PerfRawCallback on_record = nullptr;
  PerfLostCallback on_lost = nullptr;
  void* cookie = nullptr;
};

class PerfRingReader {
 public:
  // `base` is the mapping: the metadata page, then `data_size` bytes (a power
  // of two) of records. The reader does not own it.
  PerfRingReader(void* base, size_t page_size, size_t data_size);
  PerfRingReader(const PerfRingReader&) = delete;
  PerfRingReader& operator=(const PerfRingReader&) = delete;
  PerfRingReader(PerfRingReader&&) = default;
  PerfRingReader& operator=(PerfRingReader&&) = default;

  // Hands every record the ring holds now to `callbacks` in the order the
  // kernel wrote them, giving each one's space back as soon as it is copied
  // out. Returns how many records it read (samples and lost notices).
  size_t Drain(const PerfRingCallbacks& callbacks);

 private:
  // Copies `size` bytes at ring offset `offset` (any value: taken modulo the
  // data size) to `out`, in two pieces when they wrap around the end.
  void CopyOut(uint64_t offset, void* out, size_t size) const;

  perf_event_mmap_page* page_;
  const uint8_t* data_;
  size_t data_size_;
  std::vector<uint64_t> scratch_;  // a record's raw bytes, 8-byte aligned
};

}  // namespace ebpf
