// KernelStackGenerations: the kernel stacks events name, read from the BPF
// program's two stack maps by generation. A map's ids are never reused while
// held, so a map filled once would lose every new stack: once a second the
// run loop starts a new generation in the map the generation before the
// current one used, emptied first. An event's stack is readable while its
// generation is the current one or the one before.
#pragma once

#include <cstdint>
#include <vector>

#include "PyPerfBpf.h"
#include "SampleAssembler.h"
#include "status.h"

namespace ebpf::pyperf {

class KernelStackGenerations final : public KernelStackSource {
 public:
  explicit KernelStackGenerations(PyPerfBpf* bpf) : bpf_(bpf) {}

  bool Read(uint32_t generation, int32_t stack_id, std::vector<uint64_t>* out) override;

  // Starts the next generation; how many stacks its map held. Every event
  // taken so far must have been read first.
  Result<size_t> StartNext();
  uint32_t current() const { return current_; }

 private:
  PyPerfBpf* bpf_;
  uint32_t current_ = 0;
};

}  // namespace ebpf::pyperf
