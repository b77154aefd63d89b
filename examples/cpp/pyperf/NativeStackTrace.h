// NativeStackTrace: the native stack of one sample, as PyPerf's design names
// it. Its constructor unwinds the event's registers and user-stack copy with
// libunwind (NativeUnwinder, src/cc); the names it finds come from a static
// cache of unw_get_proc_name results keyed by file and offset, shared by every
// sample and every process for PyPerf's life, which cache_eviction() ages
// once per sampling round. A host profile of PyPerf filtered by
// NativeStackTrace::NativeStackTrace, NativeStackTrace::cache_eviction and
// _Ux86_64_get_proc_name shows what native stacks cost.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "PyPerfBpfShared.h"
#include "native_unwinder.h"

namespace ebpf::pyperf {

// Where the eval-loop call that runs the event's innermost Python frame has
// its entry shim (PyPerfBpfShared.h, pyperf_event.entries: 3.12 on), a local
// of that call's C frame; 0 where the event does not say (before 3.12, a
// shim off the stack, no Python frames). Leaf mode's unwind ends with the
// frame that holds it (NativeSnapshot::stop_frame_anchor).
uint64_t InnermostCallAnchor(const pyperf_event& event);

class NativeStackTrace {
 public:
  // Sets up the process-wide unwinder and its caches, once, before the first
  // sample (a second call replaces them: tests and fuzzers).
  static void Configure(const NativeUnwinderOptions& options);
  // Native frames off again, the unwinder and its caches gone (tests).
  static void Reset();
  // Whether Configure was called: native frames are on.
  static bool enabled();
  // Once per sampling round: ages the caches and the per-process state.
  static void cache_eviction();
  // Drops what is known about a pid that exited or exec'd.
  static void ForgetProcess(pid_t pid);
  // The unwinder, for its counters and files (null unless enabled()).
  static const NativeUnwinder* unwinder();

  // Unwinds `event` (`size`: as the perf buffer delivered it; the stack copy
  // may be cut) into `*frames`, leaf first: reused from sample to sample, so
  // that a sample allocates nothing once it has grown. Needs enabled().
  NativeStackTrace(const pyperf_event& event, size_t size, std::vector<NativeFrame>* frames);

  const std::vector<NativeFrame>& frames() const { return frames_; }
  const NativeUnwindResult& result() const { return result_; }

 private:
  const std::vector<NativeFrame>& frames_;
  NativeUnwindResult result_;
};

}  // namespace ebpf::pyperf
