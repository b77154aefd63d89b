// The unwinder's fast path: a walk of one snapshot that uses only what the
// name cache already holds (each frame's name and its FrameRule, cached by
// (file, offset) in proc_name_cache.h) and two reads of the stack copy per
// frame. It never enters libunwind, takes no lock and makes no system call.
//
// It gives up as soon as anything is not known for sure: an address outside
// the known mappings, a name not cached yet, a rule that is not simple, a
// read outside the stack copy, a step that would not advance (libunwind calls
// that a bad frame). The caller then unwinds the sample with libunwind from
// the start, which fills the cache for the next identical stack. When it
// finishes, its frames are exactly libunwind's: the same end conditions (ip 0,
// an undefined return address, an undefined RBP: x86-64's outermost frame),
// the same stop symbols and stop frame anchor, max_depth and end of the stack
// copy (UnwindBounds).
#pragma once

#include <cstddef>

#include "native_frame_writer.h"
#include "native_unwind_types.h"
#include "proc_name_cache.h"
#include "process_unwind_state.h"

namespace ebpf {

// Whether the frame whose stack pointer is `frame_sp` and whose caller's is
// `caller_sp` holds the snapshot's stop_frame_anchor, and so ends the unwind;
// never the outermost frame (`outermost`: it has no caller). Both walks ask
// it after each step.
bool HoldsAnchor(const NativeSnapshot& s, uint64_t frame_sp, uint64_t caller_sp, bool outermost);

// True when the walk completed: *w holds the frames and *result says how it
// ended. False when it gave up: *w holds partial frames, to be rewound, each
// of which was counted as a name cache hit (ProcNameCache::Probe; misses are
// not counted) that the caller takes back before looking them up again.
bool WalkWithCachedRules(const NativeSnapshot& s, ProcessUnwindState* process, ProcNameCache* names,
                         const UnwindBounds& bounds, FrameWriter* w, NativeUnwindResult* result);

}  // namespace ebpf
