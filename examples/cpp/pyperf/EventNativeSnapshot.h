// NativeSnapshotOf: what the native unwinder needs from one BPF event (its
// registers, the task's mm as the process's identity, and the part of the
// user-stack copy from sp on). One definition, used by the profiler and by
// the event fuzz target.
#pragma once

#include <cstddef>

#include "PyPerfBpfShared.h"
#include "native_unwinder.h"

namespace pyperf {

// `size` is the event's size as the perf buffer delivered it: the copy may be
// shorter than user_stack_len says if the record was cut.
inline NativeSnapshot NativeSnapshotOf(const pyperf_event& event, size_t size) {
  NativeSnapshot snapshot;
  snapshot.pid = static_cast<pid_t>(event.pid);
  snapshot.ip = event.ip;
  snapshot.sp = event.sp;
  snapshot.bp = event.bp;
  snapshot.process_key = event.mm;
  // BPF copies from just below sp (the red zone); the unwinder wants the
  // bytes from sp on.
  size_t copied =
      size > offsetof(pyperf_event, user_stack) ? size - offsetof(pyperf_event, user_stack) : 0;
  if (copied > event.user_stack_len) copied = event.user_stack_len;
  if (event.user_stack_start <= event.sp && event.sp - event.user_stack_start < copied) {
    size_t skip = event.sp - event.user_stack_start;
    snapshot.stack = event.user_stack + skip;
    snapshot.stack_len = copied - skip;
  }
  return snapshot;
}

}  // namespace pyperf
