// SampleAssembler: see SampleAssembler.h.
#include "SampleAssembler.h"

#include <cstdio>
#include <cstring>

#include "FrameSpelling.h"
#include "NativeStackTrace.h"
#include "utf8.h"

namespace ebpf::pyperf {
namespace {

constexpr int32_t kNoKernelStack = -14;  // -EFAULT: the sample hit user mode

}  // namespace

SampleAssembler::SampleAssembler(PythonStackDecoder* python, KernelStackSource* kernel_stacks,
                                 const KernelSymbols* kernel_symbols)
    : python_(python), kernel_stacks_(kernel_stacks), kernel_symbols_(kernel_symbols) {}

void SampleAssembler::ForgetProcess(pid_t pid) {
  python_->ForgetProcess(pid);
  NativeStackTrace::ForgetProcess(pid);
}

void SampleAssembler::AddMarker(std::string_view text) {
  SampleFrame frame;
  frame.kind = FrameKind::kMarker;
  frame.name = dictionary_->Intern(text);
  sample_->frames.push_back(frame);
}

void SampleAssembler::Assemble(const pyperf_event& event, size_t size,
                               const TrackedProcess& process, FrameDictionary* dictionary,
                               Sample* sample) {
  dictionary_ = dictionary;
  sample_ = sample;
  sample->pid = event.pid;
  sample->tid = event.tid;
  sample->frames.clear();
  // The thread's comm: bytes the process chose (prctl, /proc/self/comm).
  std::string_view comm(event.comm, strnlen(event.comm, sizeof(event.comm)));
  if (IsPrintableUtf8(comm)) {
    sample->comm = dictionary->Intern(comm);
  } else {
    scratch_.clear();
    AppendSanitizedUtf8(comm, &scratch_);
    sample->comm = dictionary->Intern(scratch_);
  }
  if (event.replaced) {
    // An exec since PyPerf inspected the process (the BPF program compared
    // its exec time with the one read before the inspection): no Python
    // frame was walked.
    ++counters_.replaced;
    AddMarker(kProcessReplaced);
  } else {
    if (event.truncated) {
      AddMarker(kTruncatedPythonStack);
      ++counters_.truncated;
    }
    if (event.error != PYPERF_ERROR_NONE) {
      AddMarker(SampleErrorText(event.error));
      ++counters_.sample_errors;
    }
    if (event.no_thread_state) ++counters_.no_thread_state;
    if (HasTaskChain(event) && !(interleaved_ && NativeStackTrace::enabled())) {
      // The tasks awaiting the running one, then its coroutine's frames on
      // (the event loop's frames below it are the tasks' place).
      ++counters_.task_samples;
      python_->AppendTaskFrames(event, dictionary, &sample->frames, &counters_.task_errors);
      python_->AppendFrames(event, process, dictionary, &sample->frames, &counters_.symbol_errors,
                            event.task_frame);
    } else if (!(interleaved_ && NativeStackTrace::enabled())) {
      python_->AppendFrames(event, process, dictionary, &sample->frames, &counters_.symbol_errors);
    }
  }
  if (interleaved_ && NativeStackTrace::enabled()) {
    AddInterleavedFrames(event, size, process);
  } else {
    AddNativeFrames(event, size);
  }
  AddKernelFrames(event);
  // A line without frames is one gProfiler cannot read.
  if (sample->frames.empty()) AddMarker(kNoFrames);
  dictionary_ = nullptr;
  sample_ = nullptr;
}

bool SampleAssembler::HasTaskChain(const pyperf_event& event) const {
  return async_tasks_ && !event.replaced && event.task_frame > 0 &&
         (event.task_count > 0 || event.task_error != PYPERF_TASK_ERROR_NONE);
}

void AppendNativeSampleFrames(const std::vector<NativeFrame>& leaf_first,
                              const NativeUnwindResult& result, const NativeUnwinder* unwinder,
                              FrameDictionary* dictionary, std::vector<SampleFrame>* out) {
  auto marker = [&](std::string_view text) {
    SampleFrame frame;
    frame.kind = FrameKind::kMarker;
    frame.name = dictionary->Intern(text);
    out->push_back(frame);
  };
  if (result.truncated) marker(kTruncatedNativeStack);
  // Leaf first as unwound; added root first.
  for (auto it = leaf_first.rbegin(); it != leaf_first.rend(); ++it)
    AppendNativeSampleFrame(*it, unwinder, dictionary, out);
}

void AppendNativeSampleFrame(const NativeFrame& native, const NativeUnwinder* unwinder,
                             FrameDictionary* dictionary, std::vector<SampleFrame>* out) {
  SampleFrame frame;
  if (native.error) {
    frame.kind = FrameKind::kMarker;
    frame.name = dictionary->Intern(NativeStackErrorText(native.name));
    out->push_back(frame);
    return;
  }
  // Names are UTF-8 already (the unwinder sanitizes them once, when cached).
  frame.kind = FrameKind::kNative;
  frame.name = dictionary->Intern(native.name);
  if (native.file != FileId{}) {
    frame.object = dictionary->FindObject(native.file);
    // Described once per file and interval, while the unwinder still has the
    // file's module cached; a file it cannot describe is no object.
    if (frame.object == 0 && unwinder) {
      std::string path, build_id;  // allocated only for a file new to the dictionary
      if (unwinder->DescribeFile(native.file, &path, &build_id))
        frame.object = dictionary->AddObject(native.file, path, build_id);
    }
    if (frame.object != 0) frame.address = native.elf_address;
  }
  out->push_back(frame);
}

void SampleAssembler::AddNativeFrames(const pyperf_event& event, size_t size) {
  if (!NativeStackTrace::enabled()) return;
  NativeStackTrace trace(event, size, &native_frames_);
  const NativeUnwindResult& result = trace.result();
  if (result.error) ++counters_.native_stack_errors;
  // Python frames run under an eval-loop frame of this stack: an unwind that
  // reached the bottom without finding it walked past it, into the frames
  // that called the loop (the thread's or the process's start).
  const bool python_frames = !event.replaced && event.frame_count > 0;
  if (python_frames && !result.reached_stop && !result.error && !result.truncated &&
      !result.copy_ended) {
    ++counters_.eval_loop_not_found;
    AddMarker(kEvalLoopNotFound);
    return;
  }
  AppendNativeSampleFrames(trace.frames(), result, NativeStackTrace::unwinder(), dictionary_,
                           &sample_->frames);
}

void SampleAssembler::AddInterleavedFrames(const pyperf_event& event, size_t size,
                                           const TrackedProcess& process) {
  NativeStackTrace trace(event, size, &native_frames_);
  if (trace.result().error) ++counters_.native_stack_errors;
  python_frames_.clear();
  python_entries_.clear();
  if (!event.replaced) {
    python_->AppendFrames(event, process, dictionary_, &python_frames_, &counters_.symbol_errors);
    // Before 3.11 every frame is its own call of the eval loop.
    const bool frame_objects =
        !process.offsets || process.offsets->frame_kind == PYPERF_FRAME_OBJECT;
    const size_t n = python_frames_.size();
    for (size_t j = 0; j < n; ++j)
      python_entries_.push_back(frame_objects ? PYPERF_ENTRY_UNANCHORED
                                              : event.entries[(n - 1 - j) % PYPERF_MAX_FRAMES]);
  }
  PythonCalls python;
  python.frames = &python_frames_;
  python.entries = &python_entries_;
  python.complete = !event.replaced && !event.truncated && event.error == PYPERF_ERROR_NONE;
  python.runs_known = event.calls_mismatch == 0;
  // --async-tasks: where the running task's coroutine frame lands; what is
  // rootward of it (the event loop's Python and native frames) is the tasks'
  // place.
  const size_t start = sample_->frames.size();
  size_t coroutine_at = SIZE_MAX;
  if (HasTaskChain(event) && event.task_frame <= python_frames_.size()) {
    python.report = python_frames_.size() - event.task_frame;
    python.reported_at = &coroutine_at;
  }
  AppendInterleavedFrames(python, event.sp, trace.frames(), trace.result(),
                          NativeStackTrace::unwinder(), dictionary_, &sample_->frames,
                          &counters_.interleave);
  if (coroutine_at == SIZE_MAX) return;
  std::vector<SampleFrame>& frames = sample_->frames;
  frames.erase(frames.begin() + static_cast<std::ptrdiff_t>(start),
               frames.begin() + static_cast<std::ptrdiff_t>(coroutine_at));
  task_frames_.clear();
  ++counters_.task_samples;
  python_->AppendTaskFrames(event, dictionary_, &task_frames_, &counters_.task_errors);
  frames.insert(frames.begin() + static_cast<std::ptrdiff_t>(start), task_frames_.begin(),
                task_frames_.end());
}

void SampleAssembler::AddKernelFrames(const pyperf_event& event) {
  const int32_t stack_id = event.kernel_stack_id;
  if (stack_id == kNoKernelStack) return;
  if (stack_id < 0 ||
      !kernel_stacks_->Read(event.kernel_stack_generation, stack_id, &kernel_addrs_)) {
    ++counters_.kernel_stack_errors;
    AddMarker(kLostKernelStack);
    return;
  }
  for (auto it = kernel_addrs_.rbegin(); it != kernel_addrs_.rend(); ++it) {
    SampleFrame frame;
    frame.kind = FrameKind::kKernel;
    std::optional<std::string_view> name;
    if (!kernel_symbols_->empty()) name = kernel_symbols_->Lookup(*it);
    if (name) {
      frame.name = dictionary_->Intern(*name);
    } else {
      // Unnamed: its address, 0x-prefixed hex.
      char text[32];
      int n = snprintf(text, sizeof(text), "0x%llx", static_cast<unsigned long long>(*it));
      frame.name = dictionary_->Intern(std::string_view(text, static_cast<size_t>(n)));
    }
    sample_->frames.push_back(frame);
  }
}

}  // namespace ebpf::pyperf
