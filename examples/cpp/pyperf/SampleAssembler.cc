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
    python_->AppendFrames(event, process, dictionary, &sample->frames, &counters_.symbol_errors);
  }
  AddNativeFrames(event, size);
  AddKernelFrames(event);
  // A line without frames is one gProfiler cannot read.
  if (sample->frames.empty()) AddMarker(kNoFrames);
  dictionary_ = nullptr;
  sample_ = nullptr;
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
  std::string path, build_id;  // empty: no allocation unless a file is new
  // Leaf first as unwound; added root first. Names are UTF-8 already (the
  // unwinder sanitizes them once, when cached).
  for (auto it = leaf_first.rbegin(); it != leaf_first.rend(); ++it) {
    if (it->error) {
      marker(NativeStackErrorText(it->name));
      continue;
    }
    SampleFrame frame;
    frame.kind = FrameKind::kNative;
    frame.name = dictionary->Intern(it->name);
    if (it->file != FileId{}) {
      frame.object = dictionary->FindObject(it->file);
      // Described once per file and interval, while the unwinder still has
      // the file's module cached; a file it cannot describe is no object.
      if (frame.object == 0 && unwinder && unwinder->DescribeFile(it->file, &path, &build_id))
        frame.object = dictionary->AddObject(it->file, path, build_id);
      if (frame.object != 0) frame.address = it->elf_address;
    }
    out->push_back(frame);
  }
}

void SampleAssembler::AddNativeFrames(const pyperf_event& event, size_t size) {
  if (!NativeStackTrace::enabled()) return;
  NativeStackTrace trace(event, size, &native_frames_);
  if (trace.result().error) ++counters_.native_stack_errors;
  AppendNativeSampleFrames(trace.frames(), trace.result(), NativeStackTrace::unwinder(),
                           dictionary_, &sample_->frames);
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
