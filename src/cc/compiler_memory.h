// Giving back the memory the BPF compile left resident. libbcc compiles the
// program with clang and LLVM in-process: their code (libLLVM and
// libclang-cpp, about 70 MiB of text) is paged in by the one compile at
// start-up and never run again, and the compile's heap is freed but kept by
// malloc. Left alone, that is most of a profiler's resident memory for as long
// as it runs.
#pragma once

#include <cstddef>

namespace ebpf {

struct ReleasedMemory {
  size_t compiler_text_bytes = 0;  // resident pages of the compiler's libraries dropped
  size_t mappings = 0;             // the mappings they were in
};

// Drops the resident pages of every mapping of a libLLVM* or libclang* file
// that is not writable and holds no private (copy-on-write) page: pages that
// are exactly the file's bytes, which a later access (a destructor at exit)
// reads again from the page cache. Mappings with private pages (RELRO, data)
// are left alone: dropping them would lose their relocations. Then returns
// the heap's free memory to the kernel (malloc_trim). Call once, after the
// last compile. Reads /proc/self/smaps; never fails (a mapping it cannot
// read about is left as it is).
ReleasedMemory ReleaseCompilerMemory();

}  // namespace ebpf
