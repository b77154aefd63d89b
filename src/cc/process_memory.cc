// Reading another process's memory: see process_memory.h.
#include "process_memory.h"

#include <sys/uio.h>

namespace ebpf {

bool ReadProcessMemory(pid_t pid, uint64_t addr, void* out, size_t size) {
  if (size == 0) return true;
  struct iovec local = {out, size};
  struct iovec remote = {reinterpret_cast<void*>(addr), size};
  ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
  return n == static_cast<ssize_t>(size);
}

}  // namespace ebpf
