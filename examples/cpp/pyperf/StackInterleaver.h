// StackInterleaver: one sample's Python frames placed among its native frames
// (--native-frames interleaved), root first, each eval-loop native frame
// replaced, in place, by the Python frames that call of the loop ran.
//
// Which frames a call ran comes from the BPF walk (pyperf_event.entries,
// PyPerfBpfShared.h): before 3.11 one frame per call; from 3.11 on the run of
// frames that ends, rootward, at the call's entry frame. Which native frame is
// a call of the eval loop: one whose symbol is the loop's (the unwinder's stop
// set), or, from 3.12 on, the one whose stack frame holds the call's entry
// shim (a local of the loop's C frame: exact, and it needs no symbol, so
// stripped interpreters pair too). Calls pair with eval-loop frames in order
// from the leaf; a shim must lie in the frame its call pairs with.
//
// Never a guessed merge:
// - the user-stack copy ended before the stack's bottom: the calls not placed
//   are printed first, root first, then kNativeStackCopyEnded, then the part
//   that was placed;
// - eval-loop frames and calls that do not pair up (a sample taken as a call
//   is entered or left, or a stack that is not what it seems), or runs of
//   frames the BPF walk found not to begin where their call's _PyCFrame says
//   (3.11, 3.12: PythonCalls::runs_known): every Python frame, then
//   kUnpairedEvalLoopFrames, then every native frame, unmerged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "Sample.h"
#include "native_unwinder.h"

namespace ebpf::pyperf {

// What interleaving could not do exactly, counted per dump.
struct InterleaveCounters {
  uint64_t copy_ended = 0;  // samples with kNativeStackCopyEnded
  uint64_t unpaired = 0;    // samples with kUnpairedEvalLoopFrames
};

// One sample's Python side: its frames root first (one per event frame; a
// frame that could not be named is its marker), and for each the
// PYPERF_ENTRY_* value of the event's frame. `complete`: the walk reached the
// thread's first frame (no truncation, no error).
struct PythonCalls {
  const std::vector<SampleFrame>* frames = nullptr;
  const std::vector<uint32_t>* entries = nullptr;
  bool complete = true;
  // The runs are the calls' own (pyperf_event.calls_mismatch not set).
  bool runs_known = true;
  // --async-tasks: frames[report]'s index in *out once appended is stored in
  // *reported_at (left alone if it is not appended).
  size_t report = SIZE_MAX;
  size_t* reported_at = nullptr;
};

// Appends the interleaved frames of one sample to *out, root first.
// `native_leaf_first` and `result` are the native unwind (walked past the
// eval loop, from the sample's `sp`); `unwinder` describes their files.
void AppendInterleavedFrames(const PythonCalls& python, uint64_t sp,
                             const std::vector<NativeFrame>& native_leaf_first,
                             const NativeUnwindResult& result, const NativeUnwinder* unwinder,
                             FrameDictionary* dictionary, std::vector<SampleFrame>* out,
                             InterleaveCounters* counters);

}  // namespace ebpf::pyperf
