// BatchedPerfBuffer: the user-space side of a BPF perf-output map
// (BPF_PERF_OUTPUT), read in batches. BCC's own perf buffer wakes its reader
// on every record, so a profiler sampling at 1000 Hz on every CPU wakes
// thousands of times a second, each wake-up a few system calls. Here each
// CPU's ring wakes the reader only after `wakeup_events` records, so
// wake-ups per second are bounded by the caller's poll timeout and the batch
// size, whatever the rate; Poll(0) reads what is there without waiting
// (before a dump, so it holds every record taken before it began).
//
// Built on libbcc's public perf_reader API; it owns the readers (their perf
// event fds and ring mappings) and the epoll fd, and frees them on
// destruction.
#pragma once

#include <bcc/perf_reader.h>

#include <memory>
#include <vector>

#include "status.h"
#include "unique_fd.h"

namespace pyperf {

class BatchedPerfBuffer {
 public:
  struct Options {
    int map_fd = -1;         // the BPF_MAP_TYPE_PERF_EVENT_ARRAY, keyed by CPU
    int pages_per_cpu = 64;  // a power of two
    int wakeup_events = 1;   // records per CPU before its ring wakes Poll
    perf_reader_raw_cb on_record = nullptr;
    perf_reader_lost_cb on_lost = nullptr;
    void* cookie = nullptr;
  };

  // Opens one ring per online CPU and stores its fd in the map under that
  // CPU's index, so the BPF program's perf_submit lands in it.
  [[nodiscard]] static Result<std::unique_ptr<BatchedPerfBuffer>> Open(const Options& options);

  BatchedPerfBuffer(const BatchedPerfBuffer&) = delete;
  BatchedPerfBuffer& operator=(const BatchedPerfBuffer&) = delete;
  ~BatchedPerfBuffer();

  // Waits up to timeout_ms for a ring to reach its wake-up count and reads
  // the rings that did; when none did (the timeout passed or a signal came:
  // -1 and errno EINTR) or timeout_ms is 0, reads every record of every
  // ring. Returns how many rings woke.
  int Poll(int timeout_ms);

  // How many times Poll found a ring awake: the wake-ups this buffer cost.
  uint64_t wakeups() const { return wakeups_; }

 private:
  BatchedPerfBuffer() = default;
  void ReadAll();  // every ring: a gettid call per ring in libbcc

  std::vector<perf_reader*> readers_;  // owned; freed by the destructor
  UniqueFd epoll_fd_;
  uint64_t wakeups_ = 0;
};

// The indices of the online CPUs, from /sys/devices/system/cpu/online.
[[nodiscard]] Result<std::vector<int>> OnlineCpus();

}  // namespace pyperf
