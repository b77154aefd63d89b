// BPF loading without kernel headers: compiles a BPF C program with libbcc
// while the kernel-header shim is installed, and checks the privileges BPF
// needs first so that a missing capability gives a clear message.
#pragma once

#include <bcc/BPF.h>

#include <memory>
#include <string>
#include <vector>

#include "status.h"

namespace pyperf {

// Ok when this process may load BPF programs and open perf events: root, or
// CAP_BPF + CAP_PERFMON (or CAP_SYS_ADMIN). Otherwise says what is missing.
Status CheckBpfPrivileges();

// Compiles and loads `program` (BPF C) with libbcc. `cflags` are passed to
// clang (e.g. "-DMAX_FRAMES=80"). Kernel headers are never needed: the shim
// stands in for them during compilation and is removed afterwards.
Result<std::unique_ptr<ebpf::BPF>> CompileBpfProgram(const std::string& program,
                                                     const std::vector<std::string>& cflags);

// Loads function `name` of a compiled program (as ebpf::BPF::load_func does),
// keeping libbcc's harmless notices about program tags off stderr; every
// other line it prints is passed through.
Status LoadBpfFunction(ebpf::BPF& bpf, const std::string& name, int prog_type, int* fd);

}  // namespace pyperf
