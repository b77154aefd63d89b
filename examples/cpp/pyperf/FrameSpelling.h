// FrameSpelling: how every frame PyPerf prints is spelled, in one place.
//
// The collapsed text gProfiler reads: a frame is its text followed by the
// suffix gProfiler reads its kind from:
//   _[p]  Python      module.Class.function (file:line)_[p]
//   _[pn] native      symbol_[pn]
//   _[k]  kernel      symbol_[k]
//   _[pe] marker      [Lost Symbol]_[pe], [Native Stack Error: ...]_[pe], ...
//   _[pt] asyncio task   name (coroutine)_[pt], e.g. request-7 (handle)_[pt]
//                        (--async-tasks; gProfiler never asks for them)
// Markers stand where frames could not be had; their texts are below. Text
// from outside (names, paths, comms) never holds ';' (the frame separator) or
// a line break: those become '_'. A stack is "<comm>-<pid>/<tid>;frame;...",
// root first.
//
// The names people read (the flame graph's boxes, speedscope's and pprof's
// functions): a Python frame is its file's base name and its qualified name
// ("demo_workload.RequestHandler.handle"), its full name the collapsed one
// ("srv.app.demo_workload.RequestHandler.handle"); other frames are their text.
//
// StackSpeller spells the samples of one dump (Sample.h) in both ways; the
// tests include this header rather than repeat the spellings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "Sample.h"

namespace ebpf::pyperf {

inline constexpr std::string_view kPythonSuffix = "_[p]";
inline constexpr std::string_view kNativeSuffix = "_[pn]";
inline constexpr std::string_view kKernelSuffix = "_[k]";
inline constexpr std::string_view kMarkerSuffix = "_[pe]";
inline constexpr std::string_view kTaskSuffix = "_[pt]";

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
// --native-frames interleaved: the native unwind needed stack beyond the copy
// taken with the sample (the copy ended before the stack's bottom, or a step
// went astray, e.g. from a frame without unwind information), and the stack
// is never read later. The Python frames whose eval-loop calls were not
// reached come first, root first, then this, then the frames that were placed.
inline constexpr std::string_view kNativeStackCopyEnded = "[Native Stack Copy Ended]";
// --native-frames interleaved: the eval loop's native frames and the Python
// frames' calls did not pair up (a call being entered or left as the sample
// was taken): every Python frame, then this, then every native frame.
inline constexpr std::string_view kUnpairedEvalLoopFrames = "[Unpaired Eval Loop Frames]";
// Leaf mode: the native unwind of a sample with Python frames reached the
// stack's bottom without finding the eval-loop frame that runs the innermost
// of them (no symbol said so, and the version or sample gave no entry shim):
// the native frames are left out, as some of them would be the process's or
// the thread's start shown under a Python frame.
inline constexpr std::string_view kEvalLoopNotFound = "[Eval Loop Frame Not Found]";
// The process exec'd since PyPerf read its offsets (its mm changed): its
// Python frames are not shown, and PyPerf inspects it again.
inline constexpr std::string_view kProcessReplaced = "[Process Replaced]";
// A sample with no frame at all (no Python frames, native frames off, taken in
// user mode): gProfiler cannot read a line without a frame, and would drop it.
inline constexpr std::string_view kNoFrames = "[No Frames]";
// --async-tasks: more tasks await the running one than an event holds
// (PYPERF_MAX_TASKS); the root-most are missing. First frame.
inline constexpr std::string_view kTaskChainTooDeep = "[Task Chain Too Deep]";
// --async-tasks: a task awaiting the running one could not be read (freed or
// reused under the sample, or an awaited-by set without a task in its first
// entries); the tasks rootward of it are missing. First frame.
inline constexpr std::string_view kTaskUnreadable = "[Task Unreadable]";
// A task frame's name when the task's name object could not be read.
inline constexpr std::string_view kUnreadableTaskName = "[Unreadable Task Name]";
// A task without a name of its own is "Task-<n>", as asyncio names it.
inline constexpr std::string_view kDefaultTaskNamePrefix = "Task-";
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

// "[Sample Error <NAME>]" and "[Native Stack Error: <what failed>]", the
// marker texts without their suffix (not escaped).
std::string SampleErrorText(uint8_t error);
std::string NativeStackErrorText(std::string_view what_failed);

// Spells the samples of one dump, whose strings are in `dictionary` (which
// outlives the speller). What it works out per file or frame is kept for the
// dump: the speller is made per dump.
class StackSpeller {
 public:
  explicit StackSpeller(const FrameDictionary& dictionary) : dictionary_(dictionary) {}

  // The collapsed line of `sample` without its count, appended to `out`.
  void AppendCollapsedStack(const Sample& sample, std::string* out);
  // "<comm>-<pid>/<tid>", as the collapsed line starts.
  void AppendThread(const Sample& sample, std::string* out) const;
  // A frame as the collapsed line spells it, suffix included.
  void AppendCollapsedFrame(const SampleFrame& frame, std::string* out);

  // Every name below is escaped as in the collapsed text (';' and line
  // breaks are '_'), so that each format shows a frame as gProfiler does.
  // The frame's full name: a Python frame's "module.Class.function" (without
  // file and line), a task's "name (coroutine)", any other frame's text.
  std::string_view FullName(const SampleFrame& frame);
  // The name people read: a Python frame's "<file base name>.Class.function";
  // any other frame's text.
  std::string_view DisplayName(const SampleFrame& frame);
  // A dictionary string (a comm, a Python file), escaped.
  std::string_view Text(StringId id);

 private:
  std::string_view String(StringId id) const { return dictionary_.String(id); }
  // PythonModuleName of a file (PythonFrameFormat.h), once per file.
  const std::string& ModuleOf(StringId file);
  struct Names {
    std::string full, display;
  };
  const Names& PythonNames(const SampleFrame& frame);
  // A task frame's "name (coroutine)", escaped, once per dump.
  const std::string& TaskName(const SampleFrame& frame);

  const FrameDictionary& dictionary_;
  std::unordered_map<StringId, std::string> modules_;
  std::unordered_map<uint64_t, Names> python_names_;      // (name, file) -> names
  std::unordered_map<uint64_t, std::string> task_names_;  // (name, coroutine) -> name
  std::unordered_map<StringId, std::string> escaped_;     // strings that had to change
  std::string scratch_;
};

}  // namespace ebpf::pyperf
