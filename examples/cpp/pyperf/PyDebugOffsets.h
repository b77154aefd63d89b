// PyDebugOffsets: the offsets a CPython 3.13+ interpreter publishes about its
// own layout. _PyRuntime starts with a _Py_DebugOffsets: the cookie
// "xdebugpy", PY_VERSION_HEX, a free-threading flag, then uint64 offsets and
// sizes of the structs a profiler reads. PyPerf reads it from the live process
// (process_vm_readv, read-only), checks it, and takes from it every
// pyperf_offsets field it covers, keeping PyOffsets.cc's table only for the
// rest, so a patch release that moves a covered field is still profiled right.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "PyPerfBpfShared.h"
#include "PythonProcess.h"
#include "PythonVersion.h"
#include "status.h"

namespace ebpf::pyperf {

// One _Py_DebugOffsets member PyPerf knows the place of.
struct DebugOffsetsMember {
  const char* path;  // member path as in the header, e.g. "thread_state.current_frame"
  size_t position;   // byte offset inside _Py_DebugOffsets
};

// The members of the _Py_DebugOffsets of `v`'s minor, in declaration order,
// up to the last one PyPerf reads; empty for a version without one (before
// 3.13) or with one PyPerf does not know (after 3.15). Transcribed from the
// headers; tests/cc/test_debug_offsets.cc checks every position.
const std::vector<DebugOffsetsMember>& DebugOffsetsLayout(const PythonVersion& v);

// How pyperf_offsets fields come from _Py_DebugOffsets: `field` is taken from
// `member`; `size_member` is the size of the struct the field lives in (the
// value must lie inside it) and `width` the bytes the BPF program reads there
// (0 where it reads none, e.g. a size).
struct DebugOffsetsCoverage {
  const char* field;
  pp_s64 pyperf_offsets::*member_of_offsets;
  const char* member;
  const char* size_member;
  int width;
};
const std::vector<DebugOffsetsCoverage>& DebugOffsetsCoverageTable();

// What one process published.
struct DebugOffsets {
  PythonVersion version;  // from its PY_VERSION_HEX
  uint64_t version_hex = 0;
  bool free_threaded = false;
  std::map<std::string, uint64_t> values;  // by member path, every member of the layout

  // The value of `path`, or nullopt if the layout has no such member.
  std::optional<uint64_t> Get(const std::string& path) const;
};

// Decodes the first bytes of _PyRuntime of an interpreter whose binary says it
// is `expected`. Fails when the cookie is wrong (not a _PyRuntime, or a
// version without debug offsets), when the published version's
// major.minor.micro differs from `expected`, or when the buffer is too short.
Result<DebugOffsets> ParseDebugOffsets(const PythonVersion& expected, const void* data,
                                       size_t size);

// Reads and decodes the _Py_DebugOffsets of process `pid` at `py_runtime`.
Result<DebugOffsets> ReadDebugOffsets(pid_t pid, uint64_t py_runtime,
                                      const PythonVersion& expected);

// `table` with every field DebugOffsetsCoverageTable() names replaced by the
// published value. runtime_interp_main, which _Py_DebugOffsets lacks, keeps
// the table's distance from runtime_interp_head (both live in
// _PyRuntimeState.interpreters); sizeof(PyCompactUnicodeObject) is the
// published one (3.15+) or derived from the published sizeof(PyASCIIObject). `table` must be the
// one for the build kind `debug` states (FindOffsets' free_threaded): fails when its
// PyObject.ob_type differs from the published one, and on values outside
// their struct.
Result<pyperf_offsets> MergeDebugOffsets(const pyperf_offsets& table, const DebugOffsets& debug);

// The offsets to profile one process with, and where they came from.
struct ProcessOffsets {
  const pyperf_offsets* offsets = nullptr;  // valid for the life of the program
  std::string source;  // for logs: "table 3.12", "_Py_DebugOffsets + table 3.13"
  // Why the offsets have no asyncio task layout (--async-tasks), if they have none.
  std::string asyncio_unavailable;
};

// The table for the process's version, merged with its _Py_DebugOffsets from
// 3.13 on (the free-threaded table when those say free_threaded). An error
// says why the process cannot be profiled (no table for the version or build
// kind, debug offsets unreadable or implausible). Equal offsets share one
// pointer, so callers may key BPF layouts by it; at most a few dozen distinct
// merged layouts are kept, beyond which this fails.
// With `asyncio` (--async-tasks), 3.14+ offsets also get the process's
// asyncio task layout (PyAsyncioOffsets.h); without it no file is read for it.
Result<ProcessOffsets> OffsetsForProcess(const PythonProcessInfo& info, bool asyncio = false);

}  // namespace ebpf::pyperf
