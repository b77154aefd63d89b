// PyOffsets: where CPython keeps what the profiler reads, one table per memory
// layout (2.7, 3.6 .. 3.15), kept as data in PyOffsets.cc. Every value is
// checked against each interpreter's own headers by tests/cc/test_py_offsets.cc.
//
// The tables describe default (release, GIL) x86-64 builds, plus the
// free-threaded 3.13t (PyOffsetsFreeThreaded.cc), whose objects have a larger
// header; a Py_DEBUG / Py_TRACE_REFS build lays PyObject out differently again
// and must not be profiled with them. For 3.13+ processes, PyDebugOffsets.h
// combines a table with what the live interpreter publishes, which also says
// whether it is free-threaded.
#pragma once

#include <string>

#include "PyPerfBpfShared.h"
#include "PythonVersion.h"

namespace ebpf::pyperf {

// Offsets for this exact version (its free-threaded build when
// `free_threaded`), or nullptr if no verified table covers it (never a guess
// from a neighbouring version).
const pyperf_offsets* FindOffsets(const PythonVersion& v, bool free_threaded = false);

// Name of the layout table FindOffsets uses, for logs ("2.7", "3.11",
// "3.13t"); empty when there is none.
std::string OffsetsLayoutName(const PythonVersion& v, bool free_threaded = false);

// The free-threaded table for `v` (3.13t only; 3.14t is not supported), or
// nullptr. In PyOffsetsFreeThreaded.cc; FindOffsets(v, true) is the way in.
const pyperf_offsets* FindFreeThreadedOffsets(const PythonVersion& v);

}  // namespace ebpf::pyperf
