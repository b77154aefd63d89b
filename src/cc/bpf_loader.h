// BPF loading without kernel headers: compiles a BPF C program with libbcc
// while the kernel-header shim is installed, and checks the privileges BPF
// needs first so that a missing capability gives a clear message.
#pragma once

#include <bcc/BPF.h>

#include <memory>
#include <string>
#include <vector>

#include "status.h"

namespace ebpf {

// Ok when this process may load BPF programs and open perf events: root, or
// CAP_BPF + CAP_PERFMON (or CAP_SYS_ADMIN). Otherwise says what is missing.
Status CheckBpfPrivileges();

// Whether the running kernel has bpf_probe_read_user/_kernel (and their _str
// forms; Linux 5.5+), asked of the verifier with a two-instruction program;
// when that cannot be loaded, decided by the kernel version. A BPF program
// that calls the helpers through its own pointers (so that libbcc does not
// look each call up in /proc/kallsyms) picks them or bpf_probe_read by this.
bool KernelHasProbeReadUser();

// Compiles and loads `program` (BPF C) with libbcc. `cflags` are passed to
// clang (e.g. "-DMAX_FRAMES=80"). Kernel headers are never needed: the shim
// stands in for them during compilation and is removed afterwards. The program
// is built without debug info (so without BTF) and without libbcc's rw
// engine: maps are read through the typed table API only.
Result<std::unique_ptr<ebpf::BPF>> CompileBpfProgram(const std::string& program,
                                                     const std::vector<std::string>& cflags);

// Loads function `name` of a compiled program (as ebpf::BPF::load_func does),
// keeping libbcc's harmless notices about program tags off stderr; every
// other line it prints is passed through.
Status LoadBpfFunction(ebpf::BPF& bpf, const std::string& name, int prog_type, int* fd);

}  // namespace ebpf
