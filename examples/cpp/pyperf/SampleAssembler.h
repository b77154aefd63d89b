// SampleAssembler: one BPF event -> one Sample (Sample.h), built once: the
// thread, then its frames root first: the markers the event calls for, the
// Python frames (PythonStackDecoder), the native frames (NativeStackTrace)
// and the kernel frames (a KernelStackSource, named by KernelSymbols). Every
// string goes into the output's FrameDictionary; what could not be had is a
// marker frame and a counter. PyPerfProfiler runs it per event; the event
// fuzz target runs the same code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "PyPerfBpfShared.h"
#include "PythonStackDecoder.h"
#include "Sample.h"
#include "StackInterleaver.h"
#include "TrackedProcess.h"
#include "kallsyms.h"
#include "native_unwinder.h"

namespace ebpf::pyperf {

// Where the kernel stacks events name are read (PyPerfBpf's stack maps, by
// generation: KernelStackGenerations.h; a fake in the fuzz target).
class KernelStackSource {
 public:
  virtual ~KernelStackSource() = default;
  // The return addresses of stack `stack_id` taken in `generation`, leaf
  // first, into *out (replaced). False if that stack is lost: never stored
  // (a negative id), or its map was emptied since.
  virtual bool Read(uint32_t generation, int32_t stack_id, std::vector<uint64_t>* out) = 0;
};

// What the samples of one dump interval could not show, counted as they are
// assembled (printed with each dump line).
struct SampleCounters {
  uint64_t truncated = 0;
  uint64_t symbol_errors = 0;
  uint64_t kernel_stack_errors = 0;
  uint64_t native_stack_errors = 0;
  uint64_t sample_errors = 0;
  // Samples of tracked processes whose thread has no PyThreadState (a native
  // thread, or one not yet or no longer known to the interpreter): they carry
  // no Python frames, and this says so.
  uint64_t no_thread_state = 0;
  // Samples of a process that exec'd since PyPerf inspected it: shown with
  // "[Process Replaced]_[pe]" and no Python frames.
  uint64_t replaced = 0;
  // Leaf mode: samples whose native frames were left out for
  // kEvalLoopNotFound.
  uint64_t eval_loop_not_found = 0;
  // --native-frames interleaved: what could not be placed exactly.
  InterleaveCounters interleave;
  // --async-tasks: samples with a task chain, and task chains or task frames
  // that could not be read whole (each shown with a marker).
  uint64_t task_samples = 0;
  uint64_t task_errors = 0;
};

// A native unwind's frames (leaf first) appended to `out` root first: its
// error frames become "[Native Stack Error: ...]" markers, an unwind cut at
// its frame limit starts with kTruncatedNativeStack; each frame's file is
// described by `unwinder` (null: no files) once per dictionary.
void AppendNativeSampleFrames(const std::vector<NativeFrame>& leaf_first,
                              const NativeUnwindResult& result, const NativeUnwinder* unwinder,
                              FrameDictionary* dictionary, std::vector<SampleFrame>* out);
// One native frame appended to `out`: a marker if it is an error frame.
void AppendNativeSampleFrame(const NativeFrame& frame, const NativeUnwinder* unwinder,
                             FrameDictionary* dictionary, std::vector<SampleFrame>* out);

class SampleAssembler {
 public:
  // Every pointer outlives the assembler. Native frames are added when
  // NativeStackTrace is enabled.
  SampleAssembler(PythonStackDecoder* python, KernelStackSource* kernel_stacks,
                  const KernelSymbols* kernel_symbols);

  // Builds `*sample` (reused: no allocation in steady state) for `event`, of
  // `size` bytes as delivered, of the tracked `process`, interning its
  // strings in `dictionary`. A `replaced` event gets the marker and no Python
  // frames: the caller has forgotten the process first.
  void Assemble(const pyperf_event& event, size_t size, const TrackedProcess& process,
                FrameDictionary* dictionary, Sample* sample);

  // Drops the per-process state of a pid (exited, exec'd or reused).
  void ForgetProcess(pid_t pid);

  // --native-frames interleaved: Python frames placed among the native ones
  // (StackInterleaver.h; the unwinder walks past the eval loop). Else the
  // Python frames, then the native frames above the innermost eval loop.
  void set_interleaved(bool interleaved) { interleaved_ = interleaved; }
  void set_async_tasks(bool async_tasks) { async_tasks_ = async_tasks; }

  SampleCounters& counters() { return counters_; }

 private:
  void AddMarker(std::string_view text);
  void AddNativeFrames(const pyperf_event& event, size_t size);
  void AddInterleavedFrames(const pyperf_event& event, size_t size, const TrackedProcess& process);
  void AddKernelFrames(const pyperf_event& event);
  // --async-tasks: the event's task chain is shown (a running task whose
  // coroutine frame the walk recorded).
  bool HasTaskChain(const pyperf_event& event) const;

  PythonStackDecoder* python_;
  KernelStackSource* kernel_stacks_;
  const KernelSymbols* kernel_symbols_;
  SampleCounters counters_;
  // The sample being built and its dictionary, during Assemble.
  FrameDictionary* dictionary_ = nullptr;
  Sample* sample_ = nullptr;
  // Reused from sample to sample.
  bool interleaved_ = false;
  bool async_tasks_ = false;
  std::vector<NativeFrame> native_frames_;
  std::vector<SampleFrame> task_frames_;
  std::vector<SampleFrame> python_frames_;  // interleaved: the Python frames, root first
  std::vector<uint32_t> python_entries_;    // ... and their PYPERF_ENTRY_* values
  std::vector<uint64_t> kernel_addrs_;
  std::string scratch_;
};

}  // namespace ebpf::pyperf
