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
  // Leaf mode ends at the eval-loop call that runs the innermost Python
  // frame: the one whose C frame holds that call's entry shim, named or not.
  snapshot.stop_frame_anchor = InnermostCallAnchor(event);
  // BPF copies from just below sp: the red zone, where an unwind rule may
  // find a register (an epilogue restored it, and the rule still says it is
  // saved there); the snapshot's stack starts at sp, with those bytes before
  // it. The copy may be shorter than user_stack_len says if the record was
  // cut.
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
    snapshot.stack_below_sp = skip;  // the red zone
  }
  return snapshot;
}

}  // namespace

uint64_t InnermostCallAnchor(const pyperf_event& event) {
  if (event.replaced) return 0;
  const uint32_t n = event.frame_count < PYPERF_MAX_FRAMES ? event.frame_count : PYPERF_MAX_FRAMES;
  // Leaf first: the first entry frame is where the innermost call's run of
  // frames begins.
  for (uint32_t j = 0; j < n; ++j) {
    const uint32_t entry = event.entries[j];
    if (entry == PYPERF_ENTRY_NONE) continue;
    if (entry < PYPERF_ENTRY_ANCHOR_BASE) return 0;
    return event.sp + (entry - PYPERF_ENTRY_ANCHOR_BASE);
  }
  return 0;
}

void NativeStackTrace::Configure(const NativeUnwinderOptions& options) {
  Unwinder() = std::make_unique<NativeUnwinder>(options);
}

void NativeStackTrace::Reset() { Unwinder().reset(); }

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
