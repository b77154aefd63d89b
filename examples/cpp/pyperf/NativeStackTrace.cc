// NativeStackTrace: see NativeStackTrace.h.
#include "NativeStackTrace.h"

#include <memory>

namespace ebpf::pyperf {
namespace {

// The one unwinder of the process: its caches live as long as PyPerf.
std::unique_ptr<NativeUnwinder>& Unwinder() {
  static std::unique_ptr<NativeUnwinder> unwinder;
  return unwinder;
}

// What the unwinder needs from one event: its registers, the task's mm as the
// process's identity, and the part of the user-stack copy from sp on.
NativeSnapshot SnapshotOf(const pyperf_event& event, size_t size) {
  NativeSnapshot snapshot;
  snapshot.pid = static_cast<pid_t>(event.pid);
  snapshot.ip = event.ip;
  snapshot.sp = event.sp;
  snapshot.bp = event.bp;
  snapshot.process_key = event.mm;
  // BPF copies from just below sp (the red zone); the unwinder wants the
  // bytes from sp on. The copy may be shorter than user_stack_len says if the
  // record was cut.
  size_t copied =
      size > offsetof(pyperf_event, user_stack) ? size - offsetof(pyperf_event, user_stack) : 0;
  if (copied > event.user_stack_len) copied = event.user_stack_len;
  // The stack goes on beyond the copy: BPF's copy was full, or the record
  // holds less of it.
  snapshot.stack_cut = event.user_stack_cut != 0 || copied < event.user_stack_len;
  if (event.user_stack_start <= event.sp && event.sp - event.user_stack_start < copied) {
    size_t skip = event.sp - event.user_stack_start;
    snapshot.stack = event.user_stack + skip;
    snapshot.stack_len = copied - skip;
  }
  return snapshot;
}

}  // namespace

void NativeStackTrace::Configure(const NativeUnwinderOptions& options) {
  Unwinder() = std::make_unique<NativeUnwinder>(options);
}

bool NativeStackTrace::enabled() { return Unwinder() != nullptr; }

void NativeStackTrace::cache_eviction() {
  if (Unwinder()) Unwinder()->cache_eviction();
}

void NativeStackTrace::ForgetProcess(pid_t pid) {
  if (Unwinder()) Unwinder()->ForgetProcess(pid);
}

const NativeUnwinder* NativeStackTrace::unwinder() { return Unwinder().get(); }

NativeStackTrace::NativeStackTrace(const pyperf_event& event, size_t size,
                                   std::vector<NativeFrame>* frames)
    : frames_(*frames), result_(Unwinder()->Unwind(SnapshotOf(event, size), frames)) {}

}  // namespace ebpf::pyperf
