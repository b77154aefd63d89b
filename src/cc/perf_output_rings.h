// PerfOutputRings: the user-space side of a BPF perf-output map
// (BPF_PERF_OUTPUT), one perf ring per online CPU, read without a system call
// per record. BCC's own perf buffer wakes its reader at every record (or
// every few) and makes a system call at each read, so a profiler sampling at
// 1000 Hz on every CPU pays thousands of system calls a second. Here each
// ring wakes Poll only when `wakeup_bytes` more bytes were written to it (a
// watermark) and reads are memory accesses only (PerfRingReader): user space
// makes one epoll_wait per Poll plus one per watermark crossing, however high
// the sampling rate, and Poll(0) reads every record with no system call at
// all (before a dump, so it holds every record taken before it began).
//
// It owns the perf event fds, their ring mappings and the epoll fd.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "perf_ring.h"
#include "status.h"
#include "unique_fd.h"
#include "unique_mmap.h"

namespace ebpf {

class PerfOutputRings {
 public:
  struct Options {
    int map_fd = -1;         // the BPF_MAP_TYPE_PERF_EVENT_ARRAY, keyed by CPU
    int pages_per_cpu = 64;  // data pages of each ring, a power of two
    // Bytes written to a ring that wake Poll; 0: half the ring.
    size_t wakeup_bytes = 0;
    PerfRawCallback on_record = nullptr;
    PerfLostCallback on_lost = nullptr;
    void* cookie = nullptr;
  };

  // Opens one ring per online CPU and stores its fd in the map under that
  // CPU's index, so the BPF program's perf_event_output lands in it.
  [[nodiscard]] static Result<std::unique_ptr<PerfOutputRings>> Open(const Options& options);

  PerfOutputRings(const PerfOutputRings&) = delete;
  PerfOutputRings& operator=(const PerfOutputRings&) = delete;
  ~PerfOutputRings();

  // Waits up to timeout_ms for a ring to cross its watermark, then reads
  // every record of every ring (memory only). With timeout_ms 0, reads them
  // without waiting and without any system call. Returns how many rings woke
  // (0 on a timeout), or -1 with errno set (EINTR: a signal came; the rings
  // were read all the same).
  int Poll(int timeout_ms);

  // How many ring wake-ups Poll has seen.
  uint64_t wakeups() const { return wakeups_; }
  // The bytes written to a ring that wake Poll.
  size_t wakeup_bytes() const { return wakeup_bytes_; }

 private:
  struct Ring {
    int cpu = -1;
    UniqueFd fd;
    UniqueMmap mapping;
    PerfRingReader reader;
  };

  PerfOutputRings() = default;
  void ReadAll();

  std::vector<Ring> rings_;
  PerfRingCallbacks callbacks_;
  UniqueFd epoll_fd_;
  uint64_t wakeups_ = 0;
  size_t wakeup_bytes_ = 0;
};

// The indices of the online CPUs, from /sys/devices/system/cpu/online.
[[nodiscard]] Result<std::vector<int>> OnlineCpus();

}  // namespace ebpf
