// KernelStackGenerations: see KernelStackGenerations.h.
#include "KernelStackGenerations.h"

namespace ebpf::pyperf {

bool KernelStackGenerations::Read(uint32_t generation, int32_t stack_id,
                                  std::vector<uint64_t>* out) {
  // Lost: the map had no room (-EEXIST: its slot holds another stack;
  // -ENOMEM), or the id is of a generation whose map has been emptied since
  // (any but the current and the one before) and may name another stack.
  const uint32_t age = current_ - generation;
  return stack_id >= 0 && age <= 1 && bpf_->ReadKernelStack(generation, stack_id, out);
}

Result<size_t> KernelStackGenerations::StartNext() {
  const uint32_t next = current_ + 1;
  auto freed = bpf_->StartKernelStackGeneration(next);
  if (freed.ok()) current_ = next;
  return freed;
}

}  // namespace ebpf::pyperf
