// PyAsyncioOffsets: where asyncio keeps a thread's running task and a task's
// name, coroutine and awaiters (--async-tasks), as the process's own build
// publishes them. CPython 3.14+ compiles a _Py_AsyncioModuleDebugOffsets into
// the _asyncio module, in an ELF section of its own (.AsyncioDebug): in the
// interpreter's executable or libpython where _asyncio is built in (Debian's
// 3.15), else in lib-dynload/_asyncio.cpython-3X-*.so (3.14). Its values are
// the file's initialized data, so PyPerf reads them from the file, whether or
// not the process has imported asyncio yet. The coroutine's frame, a type's
// flags, an int's digits and a set's table come from the process's
// _Py_DebugOffsets (PyDebugOffsets.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "PyDebugOffsets.h"
#include "PyPerfBpfShared.h"
#include "PythonProcess.h"
#include "status.h"

namespace ebpf::pyperf {

// _Py_AsyncioModuleDebugOffsets (3.14, 3.15), member by member.
struct AsyncioDebugOffsets {
  uint64_t task_size = 0, task_name = 0, task_awaited_by = 0, task_is_task = 0,
           task_awaited_by_is_set = 0, task_coro = 0, task_node = 0;
  uint64_t interp_size = 0, interp_tasks_head = 0;
  uint64_t tstate_size = 0, tstate_running_loop = 0, tstate_running_task = 0, tstate_tasks_head = 0;
};
inline constexpr std::string_view kAsyncioDebugSection = ".AsyncioDebug";
inline constexpr size_t kAsyncioDebugSize = 13 * sizeof(uint64_t);

// Decodes the section's bytes; fails when they are too short or a field lies
// outside the struct it names (not the layout PyPerf knows).
Result<AsyncioDebugOffsets> ParseAsyncioDebugOffsets(std::string_view bytes);

// The files that may hold the section for `info`'s interpreter, most likely
// first, as host paths: the interpreter's own file, then its lib-dynload's
// _asyncio modules.
std::vector<std::string> AsyncioDebugCandidates(const PythonProcessInfo& info);

// The section of the first candidate that has one.
Result<AsyncioDebugOffsets> FindAsyncioDebugOffsets(const PythonProcessInfo& info);

// `o` with its asyncio fields set from `asyncio` and `debug` (which must have
// gen_object, type_object.tp_flags, long_object and set_object: 3.14+).
Result<pyperf_offsets> WithAsyncioOffsets(const pyperf_offsets& o,
                                          const AsyncioDebugOffsets& asyncio,
                                          const DebugOffsets& debug);

}  // namespace ebpf::pyperf
