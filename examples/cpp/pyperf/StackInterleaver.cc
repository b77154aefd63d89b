// StackInterleaver: see StackInterleaver.h.
#include "StackInterleaver.h"

#include <cstddef>
#include <limits>

#include "FrameSpelling.h"
#include "PyPerfBpfShared.h"
#include "SampleAssembler.h"

namespace ebpf::pyperf {
namespace {

// One call of the eval loop: the Python frames it ran, [begin, end) of the
// root-first frames, and where its entry shim is (0: not known).
struct Call {
  size_t begin = 0, end = 0;
  uint64_t anchor = 0;
};

// Reused from sample to sample (the sampling loop is single-threaded; the
// fuzz target too).
std::vector<Call>& CallsScratch() {
  static std::vector<Call> calls;
  return calls;
}
std::vector<int>& PairsScratch() {
  static std::vector<int> pairs;
  return pairs;
}

void AppendMarker(std::string_view text, FrameDictionary* dictionary,
                  std::vector<SampleFrame>* out) {
  SampleFrame frame;
  frame.kind = FrameKind::kMarker;
  frame.name = dictionary->Intern(text);
  out->push_back(frame);
}

}  // namespace

void AppendInterleavedFrames(const PythonCalls& python, uint64_t sp,
                             const std::vector<NativeFrame>& native,
                             const NativeUnwindResult& result, const NativeUnwinder* unwinder,
                             FrameDictionary* dictionary, std::vector<SampleFrame>* out,
                             InterleaveCounters* counters) {
  const std::vector<SampleFrame>& py = *python.frames;
  const std::vector<uint32_t>& entries = *python.entries;
  // Appends py[begin, end), noting where the reported frame lands.
  auto append_python = [&](size_t begin, size_t end) {
    if (python.reported_at && python.report >= begin && python.report < end)
      *python.reported_at = out->size() + (python.report - begin);
    out->insert(out->end(), py.begin() + static_cast<std::ptrdiff_t>(begin),
                py.begin() + static_cast<std::ptrdiff_t>(end));
  };
  if (result.copy_ended) ++counters->copy_ended;
  // No Python frames (a native thread, a replaced process): nothing to place.
  if (py.empty()) {
    if (result.copy_ended) AppendMarker(kNativeStackCopyEnded, dictionary, out);
    AppendNativeSampleFrames(native, result, unwinder, dictionary, out);
    return;
  }

  // The calls, leaf first: each run of frames ends, rootward, at its entry
  // frame; frames rootward of the last entry (a walk cut short) are one more.
  std::vector<Call>& calls = CallsScratch();
  calls.clear();
  size_t end = py.size();
  for (size_t j = py.size(); j-- > 0;) {
    const uint32_t entry = j < entries.size() ? entries[j] : PYPERF_ENTRY_UNANCHORED;
    if (entry == PYPERF_ENTRY_NONE) continue;
    Call call{j, end, 0};
    if (entry >= PYPERF_ENTRY_ANCHOR_BASE) call.anchor = sp + (entry - PYPERF_ENTRY_ANCHOR_BASE);
    calls.push_back(call);
    end = j;
  }
  // Frames rootward of the last entry frame: a walk cut short, or (a walk
  // that reached the thread's first frame) a chain that is not what it seems,
  // since the first frame of a thread is always an eval loop call's entry.
  const bool open_root = end > 0;
  if (open_root) calls.push_back(Call{0, end, 0});

  // Pair eval-loop frames with calls, leaf first. pairs[i]: the call native
  // frame i ran, or -1.
  std::vector<int>& pairs = PairsScratch();
  pairs.assign(native.size(), -1);
  const bool native_complete = !result.error && !result.truncated && !result.copy_ended;
  size_t placed = 0;            // calls paired so far
  size_t kept = native.size();  // native frames below this index are printed
  bool unpaired = (open_root && python.complete) || !python.runs_known;
  for (size_t i = 0; !unpaired && i < native.size(); ++i) {
    const NativeFrame& f = native[i];
    if (f.error) continue;
    // The frame's own stack: up to the calling frame's sp. The outermost
    // frame's is open-ended where the unwind reached the stack's bottom; where
    // it stopped short, its end is not known, so a shim beyond its sp names it
    // only if its symbol says it is the eval loop.
    uint64_t top = std::numeric_limits<uint64_t>::max();
    if (i + 1 < native.size() && !native[i + 1].error) {
      top = native[i + 1].sp;
    } else if (!native_complete && !f.stop_symbol) {
      top = f.sp;
    }
    const bool has_call = placed < calls.size();
    const uint64_t anchor = has_call ? calls[placed].anchor : 0;
    const bool anchored = anchor != 0 && anchor >= f.sp && anchor < top;
    if (!f.stop_symbol && !anchored) continue;
    if (!has_call) {
      // An eval-loop frame with no call left: the Python walk stopped short
      // (its marker is printed), so what is rootward of here is not shown.
      if (!python.complete) {
        kept = i;
      } else {
        unpaired = true;
      }
      break;
    }
    if (anchor != 0 && !anchored) {
      unpaired = true;
      break;
    }
    pairs[i] = static_cast<int>(placed++);
  }
  if (!unpaired && placed < calls.size() && native_complete) unpaired = true;

  if (unpaired) {
    ++counters->unpaired;
    append_python(0, py.size());
    AppendMarker(kUnpairedEvalLoopFrames, dictionary, out);
    AppendNativeSampleFrames(native, result, unwinder, dictionary, out);
    return;
  }
  // Calls no native frame was found for (the unwind ended first): root
  // first, ahead of the marker that says why.
  for (size_t c = calls.size(); c-- > placed;) append_python(calls[c].begin, calls[c].end);
  if (result.copy_ended) AppendMarker(kNativeStackCopyEnded, dictionary, out);
  if (result.truncated) AppendMarker(kTruncatedNativeStack, dictionary, out);
  for (size_t i = kept; i-- > 0;) {
    if (pairs[i] >= 0) {
      const Call& call = calls[static_cast<size_t>(pairs[i])];
      append_python(call.begin, call.end);
    } else {
      AppendNativeSampleFrame(native[i], unwinder, dictionary, out);
    }
  }
}

}  // namespace ebpf::pyperf
