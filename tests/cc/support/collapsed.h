// A reader of PyPerf's collapsed output for the end-to-end tests, parsing each
// line the way gProfiler does:
//   line.rsplit(" ", 1)        -> stack, count
//   stack.split(";", 1)        -> first token, frames (root to leaf)
//   first token.rsplit("-", 1) -> comm, "pid/tid"
// plus helpers to classify frames by their suffix (Python, native, kernel,
// marker: spelled as FrameSpelling.h says), pick the lines of a process or thread,
// check that frames come in root->leaf order, and split a Python frame
//   <module>.<Class.>function (<file>:<line>)_[p]
// into its parts; and what the formats for people (flame graph, speedscope)
// read back into, for a TestStack.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "FrameSpelling.h"
#include "support/test_stack.h"

namespace pyperf_test {

enum class FrameKind { kPython, kNative, kKernel, kError, kTask, kUnknown };

// The kind named by a frame's suffix.
FrameKind KindOf(const std::string& frame);
const char* FrameKindName(FrameKind kind);

// The marker PyPerf puts first when the Python stack was cut.
inline const std::string kTruncationMarker =
    ebpf::pyperf::SpellFrame(ebpf::pyperf::FrameKind::kMarker, ebpf::pyperf::kTruncatedPythonStack);

struct CollapsedLine {
  std::string text;  // the line as written
  std::string comm;
  pid_t pid = 0;
  pid_t tid = 0;
  std::vector<std::string> frames;  // root to leaf, each with its suffix
  uint64_t count = 0;
};

struct CollapsedProfile {
  std::vector<CollapsedLine> lines;
  // Lines gProfiler could not read, each with why ("<why>: <line>").
  std::vector<std::string> unparseable;

  uint64_t TotalSamples() const;
  std::vector<CollapsedLine> OfPid(pid_t pid) const;
  std::vector<CollapsedLine> OfTid(pid_t tid) const;
  // The distinct tids (in order of first appearance) having at least one line
  // that satisfies `pred`.
  std::vector<pid_t> TidsWhere(const std::function<bool(const CollapsedLine&)>& pred) const;
};

// Parses one line; nullopt (with `why` set) if gProfiler could not read it.
std::optional<CollapsedLine> ParseCollapsedLine(const std::string& line, std::string* why);
// Parses a stack, a line without its count (as StackCounts keys them); the
// count is 0.
std::optional<CollapsedLine> ParseCollapsedStack(const std::string& stack,
                                                 std::string* why = nullptr);
// The offset of the first byte of `text` that is not strict UTF-8, or is NUL.
std::optional<size_t> FirstNonUtf8Byte(const std::string& text);

// Parses a whole output (a dumped file or PyPerf's stdout); empty lines are
// skipped. Adds a test failure if the output is not strict UTF-8, holds a NUL
// byte, or has a line gProfiler could not read (such a line would be dropped
// silently): every dump the end-to-end tests read is checked here.
CollapsedProfile ParseCollapsed(const std::string& text);

uint64_t SumCounts(const std::vector<CollapsedLine>& lines);

// A collapsed output (ParseCollapsed's checks included) as stack -> count,
// the stack being the line without its count.
std::map<std::string, uint64_t> StackCounts(const std::string& text);

// The frames of `line` of one kind, root to leaf.
std::vector<std::string> FramesOfKind(const CollapsedLine& line, FrameKind kind);

// Error markers other than the truncation marker and the native markers
// (sample errors, lost symbols, "(missing)", lost kernel stacks).
std::vector<std::string> ErrorMarkers(const CollapsedLine& line);
// A marker native unwinding left: "[Native Stack Error: ...]" or
// "[Truncated Native Stack]".
bool IsNativeMarker(const std::string& frame);
bool IsTruncated(const CollapsedLine& line);  // the marker is the first frame
// Leaf mode's native frames lie between the innermost Python frame and the
// sampled PC: a frame of the process's or a thread's start (_start,
// Py_BytesMain, PyEval_EvalCode, start_thread, clone3, ...) after a Python
// frame is one the unwind walked past the eval loop into. Returns the first
// such frame, or nullopt.
std::optional<std::string> StartFrameUnderPythonFrame(const CollapsedLine& line);

// The last frame once trailing native and kernel frames are dropped: the
// innermost Python frame of a good sample, or whatever stands in its place.
std::optional<std::string> LeafIgnoringNativeAndKernel(const CollapsedLine& line);

// Why the frames are not in the order PyPerf must write them (truncation and
// sample-error markers first, then Python frames, then native frames and
// markers, then kernel), or nullopt if they are.
std::optional<std::string> FrameOrderProblem(const CollapsedLine& line);

// The indices of frames matching `matchers` in order (each after the
// previous one, not necessarily adjacent), or nullopt if there are none.
std::optional<std::vector<size_t>> FindInOrder(
    const std::vector<std::string>& frames,
    const std::vector<std::function<bool(const std::string&)>>& matchers);

struct PythonFrame {
  std::string qualified_name;  // "<module>.<Class.>function"
  std::string module;
  std::string class_name;  // empty for a plain function
  std::string function;
  std::string file;
  int line = 0;
};

// The module a frame of `file` must name, by the README's rule, written out
// here apart from PyPerf's own code (PythonModuleName) so that a wrong module
// fails the parse: everything up to the last "lib[64]/pythonX[.Y][t]/",
// "site-packages/" or "dist-packages/" goes, then leading "/" and "./"; a
// ".py" suffix goes, "/" becomes ".", and "pkg.__init__" is "pkg";
// "<frozen m>" is m and other "<...>" names stay as they are.
std::string ExpectedModuleOf(const std::string& file);

// Splits a Python frame. The module is ExpectedModuleOf(file), so the name
// must start with it; what follows is "Class.function" or "function".
// Nullopt (with `why`) if the frame is not spelled that way.
std::optional<PythonFrame> ParsePythonFrame(const std::string& frame, std::string* why = nullptr);

// The names of a Python frame of `qualified_name` ("Class.function") in
// `file`: its full name "<module>.Class.function", as the collapsed text has
// it, and its display name "<the module's last component>.Class.function",
// as people read it (just the qualified name if the module is empty).
std::string ExpectedFullName(const std::string& qualified_name, const std::string& file);
std::string ExpectedDisplayName(const std::string& qualified_name, const std::string& file);

// How a format for people names Python frames.
enum class PythonNaming { kFullName, kDisplayName };
// A frame's text with its suffix, escaped as the collapsed text escapes it
// (';' and line breaks are '_'), as every format shows it; a Python frame
// "<name> (<file>:<line>)_[p]", named by `naming` (kFullName: the collapsed
// frame itself).
std::string EscapedFrame(const TestFrame& frame, PythonNaming naming);
// `stack` as a format for people reads back into a stack: the collapsed
// line's first token, then each frame's EscapedFrame.
std::string EscapedStack(const TestStack& stack, PythonNaming naming);

// A collapsed Python frame "<module>.<Class.>function (<file>:<line>)_[p]" as
// "<display name> (<file>:<line>)_[p]"; any other frame (or one that does not
// parse) as it is.
std::string DisplayViewOfFrame(const std::string& frame);

// The Python frames of `line`, parsed; frames that do not parse are skipped.
std::vector<PythonFrame> PythonFramesOf(const CollapsedLine& line);

// The lines whose Python frames end with frames of `functions` (in this
// order, innermost last); `rooted` also requires the first of them to be the
// root.
std::vector<CollapsedLine> LinesEndingWith(const std::vector<CollapsedLine>& lines,
                                           const std::vector<std::string>& functions, bool rooted);

// A predicate on lines: true for a line LinesEndingWith(..., functions,
// rooted) would select.
std::function<bool(const CollapsedLine&)> PythonStackEndsWith(std::vector<std::string> functions,
                                                              bool rooted);

// True if `frame` is a Python frame of `function` (and, when given, of
// `class_name`; "" requires a plain function).
bool IsPythonFunction(const std::string& frame, const std::string& function,
                      const std::optional<std::string>& class_name = std::nullopt);

}  // namespace pyperf_test
