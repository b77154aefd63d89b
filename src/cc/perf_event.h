// Perf events owned by the caller: a sampling event on the calling thread's
// own CPU time, with a BPF program attached to its overflow, for short
// measurements of the kernel as it runs this thread (e.g. checking the
// offsets a BPF program will read at). Linux only.
#pragma once

#include <cstdint>

#include "status.h"
#include "unique_fd.h"

namespace ebpf {

// Opens a sampling event on the task clock of the calling thread (any CPU,
// children not inherited) that overflows every `period_ns` of the thread's
// CPU time, user and kernel alike. It is opened disabled.
Result<UniqueFd> OpenThreadClockSampler(uint64_t period_ns);

// Runs BPF program `prog_fd` (BPF_PROG_TYPE_PERF_EVENT) on each overflow of
// the perf event `perf_fd`.
Status AttachBpfToPerfEvent(const UniqueFd& perf_fd, int prog_fd);

Status EnablePerfEvent(const UniqueFd& perf_fd);
Status DisablePerfEvent(const UniqueFd& perf_fd);

}  // namespace ebpf
