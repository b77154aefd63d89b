// Reading another process's memory without stopping or tracing it:
// process_vm_readv only. PyPerf never writes to a profiled process.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace ebpf {

// Copies `size` bytes at `addr` in process `pid` into `out`. True only when
// every byte was read.
bool ReadProcessMemory(pid_t pid, uint64_t addr, void* out, size_t size);

}  // namespace ebpf
