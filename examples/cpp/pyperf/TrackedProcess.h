// TrackedProcess: one profiled Python process, as worked out once when
// PyPerf starts profiling it: its identity, its CPython version and the
// offsets its memory is read with (3.13+: what the interpreter itself
// published in _Py_DebugOffsets, merged with PyOffsets' table). Everything
// that decodes the process's samples takes it from here, never again from
// the version.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "PyPerfBpfShared.h"
#include "PythonVersion.h"

namespace ebpf::pyperf {

struct TrackedProcess {
  pid_t pid = 0;
  uint64_t start_time = 0;  // with pid, names the process (pids are reused)
  // Its last exec seen before it was inspected (PyPerfBpf::ExecTime; 0 for
  // none): the BPF program marks samples of a later exec (pyperf_event.replaced).
  uint64_t exec_time = 0;
  PythonVersion version;
  const pyperf_offsets* offsets = nullptr;  // valid for the life of the program
  std::string offsets_source;               // for logs: "table 3.12", "_Py_DebugOffsets + ..."
};

}  // namespace ebpf::pyperf
