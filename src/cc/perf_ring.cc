// See perf_ring.h.
#include "perf_ring.h"

#include <linux/perf_event.h>

#include <algorithm>
#include <cstring>

namespace ebpf {
namespace {

// The largest record the kernel writes: its header's size is 16 bits.
constexpr size_t kMaxRecordBytes = 65535;

struct LostRecordBody {  // after the header of a PERF_RECORD_LOST
  uint64_t id;
  uint64_t lost;
};

}  // namespace

PerfRingReader::PerfRingReader(void* base, size_t page_size, size_t data_size)
    : page_(static_cast<perf_event_mmap_page*>(base)),
      data_(static_cast<const uint8_t*>(base) + page_size),
      data_size_(data_size),
      scratch_((std::min(data_size, kMaxRecordBytes) + sizeof(uint64_t) - 1) / sizeof(uint64_t)) {}

void PerfRingReader::CopyOut(uint64_t offset, void* out, size_t size) const {
  const size_t start = static_cast<size_t>(offset & (data_size_ - 1));
  const size_t first = std::min(size, data_size_ - start);
  std::memcpy(out, data_ + start, first);
  if (first < size) std::memcpy(static_cast<uint8_t*>(out) + first, data_, size - first);
}

size_t PerfRingReader::Drain(const PerfRingCallbacks& callbacks) {
  // Acquire: the records before head are all written once we see it.
  const uint64_t head = __atomic_load_n(&page_->data_head, __ATOMIC_ACQUIRE);
  uint64_t tail = page_->data_tail;  // only this reader writes it
  size_t records = 0;
  while (tail != head) {
    perf_event_header header;
    CopyOut(tail, &header, sizeof(header));
    const uint64_t left = head - tail;
    if (header.size < sizeof(header) || header.size > left) {
      // Not a record the kernel wrote: give the rest back rather than loop.
      tail = head;
      __atomic_store_n(&page_->data_tail, tail, __ATOMIC_RELEASE);
      break;
    }
    const uint64_t body = tail + sizeof(header);
    const size_t body_size = header.size - sizeof(header);
    ++records;
    if (header.type == PERF_RECORD_SAMPLE && body_size >= sizeof(uint32_t)) {
      uint32_t raw_size = 0;
      CopyOut(body, &raw_size, sizeof(raw_size));
      if (raw_size > body_size - sizeof(uint32_t)) raw_size = 0;  // malformed: an empty sample
      CopyOut(body + sizeof(uint32_t), scratch_.data(), raw_size);
      // Release: our copy is complete before the kernel may reuse the space.
      tail += header.size;
      __atomic_store_n(&page_->data_tail, tail, __ATOMIC_RELEASE);
      if (callbacks.on_record)
        callbacks.on_record(callbacks.cookie, scratch_.data(), static_cast<int>(raw_size));
    } else if (header.type == PERF_RECORD_LOST && body_size >= sizeof(LostRecordBody)) {
      LostRecordBody lost;
      CopyOut(body, &lost, sizeof(lost));
      tail += header.size;
      __atomic_store_n(&page_->data_tail, tail, __ATOMIC_RELEASE);
      if (callbacks.on_lost) callbacks.on_lost(callbacks.cookie, lost.lost);
    } else {
      tail += header.size;  // a record type we did not ask for
      __atomic_store_n(&page_->data_tail, tail, __ATOMIC_RELEASE);
    }
  }
  return records;
}

}  // namespace ebpf
