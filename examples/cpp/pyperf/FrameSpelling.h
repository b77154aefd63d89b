// FrameSpelling: how every frame PyPerf prints is spelled, in one place.
//
// A frame is its text followed by the suffix gProfiler reads its kind from:
//   _[p]  Python      module.Class.function (file:line)_[p]
//   _[pn] native      symbol_[pn]
//   _[k]  kernel      symbol_[k]
//   _[pe] marker      [Lost Symbol]_[pe], [Native Stack Error: ...]_[pe], ...
// Markers stand where frames could not be had; their texts are below. Text
// from outside (names, paths, comms) never holds ';' (the frame separator) or
// a line break: those become '_'.
//
// StackText builds one sample's stack, root first, the way the collapsed
// printer aggregates it ("<comm>-<pid>/<tid>;frame;frame"); later printers
// take their frame texts and markers from here too. The tests include this
// header rather than repeat the spellings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "native_unwinder.h"

namespace pyperf {

enum class FrameKind { kPython, kNative, kKernel, kMarker };

inline constexpr std::string_view kPythonSuffix = "_[p]";
inline constexpr std::string_view kNativeSuffix = "_[pn]";
inline constexpr std::string_view kKernelSuffix = "_[k]";
inline constexpr std::string_view kMarkerSuffix = "_[pe]";

inline constexpr char kFrameSeparator = ';';

// Marker texts (each printed with kMarkerSuffix).
// The Python stack was deeper than the BPF program walks; first frame.
inline constexpr std::string_view kTruncatedPythonStack = "[Truncated Python Stack]";
// A Python symbol id not found: the BPF symbols map was full.
inline constexpr std::string_view kLostSymbol = "[Lost Symbol]";
// A Python frame without a code object.
inline constexpr std::string_view kMissingPythonFrame = "(missing)";
// The kernel stack could not be recorded (e.g. the stack map was full).
inline constexpr std::string_view kLostKernelStack = "[Lost Kernel Stack]";
// Native unwinding stopped at its frame limit before the interpreter's eval
// loop: the native frames nearer the root are missing.
inline constexpr std::string_view kTruncatedNativeStack = "[Truncated Native Stack]";
// The process exec'd since PyPerf read its offsets (its mm changed): its
// Python frames are not shown, and PyPerf inspects it again.
inline constexpr std::string_view kProcessReplaced = "[Process Replaced]";
// A stack text another format's encoder could not read back (never one
// StackText built): its samples are counted under this marker, not dropped.
inline constexpr std::string_view kUnparseableStack = "[Unparseable Stack]";
// A sample with no frame at all (no Python frames, native frames off, taken in
// user mode): gProfiler cannot read a line without a frame, and would drop it.
inline constexpr std::string_view kNoFrames = "[No Frames]";
// "[Sample Error <NAME>]": the BPF program could not walk the Python stack.
inline constexpr std::string_view kSampleErrorOpen = "[Sample Error ";
// "[Native Stack Error: <what failed>]": native unwinding failed; the frames
// it found before failing (nearer the leaf) follow it.
inline constexpr std::string_view kNativeStackErrorOpen = "[Native Stack Error: ";
inline constexpr std::string_view kMarkerClose = "]";

// The suffix of a frame of `kind`.
std::string_view FrameSuffix(FrameKind kind);

// Appends `text` with ';' and line breaks turned into '_'.
void AppendFrameText(std::string_view text, std::string* out);

// A whole frame, `text` (escaped) and its suffix. Allocates: for frames
// spelled once and cached, and for tests.
std::string SpellFrame(FrameKind kind, std::string_view text);
// "[Sample Error <NAME>]_[pe]" for a PYPERF_ERROR_* code.
std::string SampleErrorFrame(uint8_t error);
// "[Native Stack Error: <what failed>]_[pe]".
std::string NativeStackErrorFrame(std::string_view what_failed);

// A stack text read back (for the encoders of other formats): its first
// token and its frames, root first, each without its suffix.
struct StackHead {
  std::string_view comm;
  uint32_t pid = 0;
  uint32_t tid = 0;
};
struct SpelledFrame {
  FrameKind kind = FrameKind::kMarker;
  std::string_view text;  // as spelled, without the suffix
};
// Splits a stack built by StackText. False if `stack` is not one (no
// "<comm>-<pid>/<tid>" first token, or a frame without a known suffix);
// `frames` is replaced and points into `stack`.
bool ParseStackText(std::string_view stack, StackHead* head, std::vector<SpelledFrame>* frames);

// One sample's stack. Reused from sample to sample, it allocates nothing once
// its buffer has grown to the longest stack.
class StackText {
 public:
  // Starts a stack with its first token, "<comm>-<pid>/<tid>". `comm` is up
  // to `comm_size` bytes (NUL-terminated if shorter); bytes that are not
  // UTF-8 become U+FFFD.
  void Start(const char* comm, size_t comm_size, uint32_t pid, uint32_t tid);

  // A frame whose text is escaped here.
  void Add(FrameKind kind, std::string_view text);
  // A frame already spelled by SpellFrame (suffix included).
  void AddSpelled(std::string_view frame);
  void AddMarker(std::string_view marker_text) { Add(FrameKind::kMarker, marker_text); }
  void AddSampleError(uint8_t error);
  // A kernel frame without a symbol: its address, 0x-prefixed hex.
  void AddKernelAddress(uint64_t address);
  // An unwinder's frames, leaf first as it returns them, added root first.
  // Its error frames become "[Native Stack Error: ...]" markers; an unwind
  // cut at its frame limit starts with kTruncatedNativeStack.
  void AddNativeFrames(const std::vector<NativeFrame>& leaf_first,
                       const NativeUnwindResult& result);

  // Adds the kNoFrames marker if no frame was added since Start.
  void EnsureFrame();

  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

}  // namespace pyperf
