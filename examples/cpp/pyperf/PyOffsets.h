// PyOffsets: where CPython keeps what the profiler reads, one table per memory
// layout (2.7, 3.6 .. 3.14), kept as data in PyOffsets.cc. Every value is
// checked against each interpreter's own headers by tests/cc/test_py_offsets.cc.
//
// The tables describe default (release, GIL) x86-64 builds: a Py_DEBUG /
// Py_TRACE_REFS build or a free-threaded 3.13t build lays PyObject out
// differently and must not be profiled with them. For 3.13+ processes,
// PyDebugOffsets.h combines a table with what the live interpreter publishes.
#pragma once

#include <string>

#include "PyPerfBpfShared.h"
#include "PythonVersion.h"

namespace pyperf {

// Offsets for this exact version, or nullptr if no verified table covers it
// (never a guess from a neighbouring version).
const pyperf_offsets* FindOffsets(const PythonVersion& v);

// Name of the layout table FindOffsets uses for v, for logs ("2.7", "3.11");
// empty when v is unsupported.
std::string OffsetsLayoutName(const PythonVersion& v);

}  // namespace pyperf
