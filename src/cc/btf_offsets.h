// BTF offsets: byte offsets of members inside kernel structures, read from the
// kernel's BTF (/sys/kernel/btf/vmlinux) with libbpf. PyPerf's BPF program
// reads task_struct only through these, never through kernel header layouts.
#pragma once

#include <cstdint>
#include <string>

#include "status.h"

namespace ebpf {

constexpr char kDefaultVmlinuxBtf[] = "/sys/kernel/btf/vmlinux";

// Offset in bytes of `member_path` (dot-separated, e.g. "thread.fsbase")
// inside `struct struct_name`, looking through anonymous structs and unions.
Result<uint64_t> BtfMemberOffset(const std::string& btf_path, const std::string& struct_name,
                                 const std::string& member_path);

struct KernelOffsets {
  uint64_t fs_base = 0;  // task_struct.thread.fsbase (x86_64 TLS base)
  uint64_t stack = 0;    // task_struct.stack (kernel stack; user regs at its top)
  // task_struct.mm: the address space, new at every exec. 0 when BTF does
  // not say (there is no flag for it: the kernel's own BTF is its only source).
  uint64_t mm = 0;
};

// What ends ReadKernelOffsets' errors: the way out when BTF cannot help.
constexpr char kKernelOffsetFlagsHint[] =
    "; pass --fs-offset and --stack-offset to give the task_struct offsets";

// The offsets from BTF (mm may be 0). The error names the BTF file and the
// override flags.
Result<KernelOffsets> ReadKernelOffsets(const std::string& btf_path = kDefaultVmlinuxBtf);

}  // namespace ebpf
