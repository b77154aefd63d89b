// A reader of PyPerf's collapsed output: see collapsed.h.
#include "support/collapsed.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <regex>
#include <set>
#include <string_view>

namespace pyperf_test {
namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// A non-empty run of decimal digits, as Python's int() reads a count or pid
// (without sign or spaces: PyPerf never writes them).
std::optional<uint64_t> ParseDecimal(const std::string& s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  uint64_t value = 0;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  return value;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    parts.push_back(s.substr(start, pos == std::string::npos ? std::string::npos : pos - start));
    if (pos == std::string::npos) return parts;
    start = pos + 1;
  }
}

std::string MarkerFrame(std::string_view text) {
  return ebpf::pyperf::SpellFrame(ebpf::pyperf::FrameKind::kMarker, text);
}

// Where a frame may stand in a stack, root to leaf; -1 = anywhere (an error
// marker this reader does not know, e.g. of a later issue).
int OrderRank(const std::string& frame) {
  switch (KindOf(frame)) {
    case FrameKind::kPython:
      return 2;
    case FrameKind::kNative:
      return 3;
    case FrameKind::kKernel:
      return 4;
    case FrameKind::kTask:  // --async-tasks: after the Python stack's own markers
      return 1;
    case FrameKind::kUnknown:
      return -1;
    case FrameKind::kError:
      break;
  }
  if (frame == kTruncationMarker) return 0;
  if (StartsWith(frame, ebpf::pyperf::kSampleErrorOpen)) return 1;
  if (frame == MarkerFrame(ebpf::pyperf::kLostSymbol) ||
      frame == MarkerFrame(ebpf::pyperf::kMissingPythonFrame))
    return 2;
  if (IsNativeMarker(frame)) return 3;
  if (frame == MarkerFrame(ebpf::pyperf::kLostKernelStack)) return 4;
  return -1;
}

}  // namespace

FrameKind KindOf(const std::string& frame) {
  if (EndsWith(frame, ebpf::pyperf::kPythonSuffix)) return FrameKind::kPython;
  if (EndsWith(frame, ebpf::pyperf::kNativeSuffix)) return FrameKind::kNative;
  if (EndsWith(frame, ebpf::pyperf::kKernelSuffix)) return FrameKind::kKernel;
  if (EndsWith(frame, ebpf::pyperf::kMarkerSuffix)) return FrameKind::kError;
  if (EndsWith(frame, ebpf::pyperf::kTaskSuffix)) return FrameKind::kTask;
  return FrameKind::kUnknown;
}

const char* FrameKindName(FrameKind kind) {
  switch (kind) {
    case FrameKind::kPython:
      return "python";
    case FrameKind::kNative:
      return "native";
    case FrameKind::kKernel:
      return "kernel";
    case FrameKind::kError:
      return "error";
    case FrameKind::kTask:
      return "task";
    case FrameKind::kUnknown:
      break;
  }
  return "unknown";
}

std::optional<CollapsedLine> ParseCollapsedLine(const std::string& line, std::string* why) {
  auto fail = [&](const std::string& reason) -> std::optional<CollapsedLine> {
    if (why) *why = reason;
    return std::nullopt;
  };
  CollapsedLine out;
  out.text = line;
  size_t space = line.rfind(' ');
  if (space == std::string::npos) return fail("no ' ' before the count");
  auto count = ParseDecimal(line.substr(space + 1));
  if (!count) return fail("the count is not a number");
  out.count = *count;
  std::string stack = line.substr(0, space);
  size_t semicolon = stack.find(';');
  if (semicolon == std::string::npos) return fail("no ';' after the first token");
  std::string first = stack.substr(0, semicolon);
  size_t dash = first.rfind('-');
  if (dash == std::string::npos) return fail("no '-' in the first token");
  out.comm = first.substr(0, dash);
  std::vector<std::string> ids = Split(first.substr(dash + 1), '/');
  if (ids.size() != 2) return fail("the first token does not end in <pid>/<tid>");
  auto pid = ParseDecimal(ids[0]);
  auto tid = ParseDecimal(ids[1]);
  if (!pid || !tid || *pid == 0 || *tid == 0) return fail("bad pid or tid in the first token");
  out.pid = static_cast<pid_t>(*pid);
  out.tid = static_cast<pid_t>(*tid);
  out.frames = Split(stack.substr(semicolon + 1), ';');
  for (const auto& frame : out.frames) {
    if (frame.empty()) return fail("an empty frame");
  }
  return out;
}

std::optional<CollapsedLine> ParseCollapsedStack(const std::string& stack, std::string* why) {
  std::optional<CollapsedLine> line = ParseCollapsedLine(stack + " 0", why);
  if (line) line->text = stack;
  return line;
}

std::optional<size_t> FirstNonUtf8Byte(const std::string& text) {
  // RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF.
  size_t i = 0;
  while (i < text.size()) {
    auto b = static_cast<unsigned char>(text[i]);
    if (b == 0) return i;
    if (b < 0x80) {
      ++i;
      continue;
    }
    int n;
    uint32_t cp, min;
    if ((b & 0xE0) == 0xC0) {
      n = 2, cp = b & 0x1F, min = 0x80;
    } else if ((b & 0xF0) == 0xE0) {
      n = 3, cp = b & 0x0F, min = 0x800;
    } else if ((b & 0xF8) == 0xF0) {
      n = 4, cp = b & 0x07, min = 0x10000;
    } else {
      return i;
    }
    if (i + n > text.size()) return i;
    for (int k = 1; k < n; ++k) {
      auto c = static_cast<unsigned char>(text[i + k]);
      if ((c & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (c & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += n;
  }
  return std::nullopt;
}

CollapsedProfile ParseCollapsed(const std::string& text) {
  // Every dump of every end-to-end test passes through here: gProfiler reads
  // them as UTF-8 (Path.read_text()), so one bad byte loses a whole interval.
  if (auto bad = FirstNonUtf8Byte(text)) {
    size_t from = *bad > 60 ? *bad - 60 : 0;
    ADD_FAILURE() << "PyPerf's output is not strict UTF-8 (or holds a NUL) at byte " << *bad
                  << ": ..." << text.substr(from, 120) << "...";
  }
  CollapsedProfile profile;
  for (const std::string& line : Split(text, '\n')) {
    if (line.empty()) continue;
    std::string why;
    if (auto parsed = ParseCollapsedLine(line, &why)) {
      profile.lines.push_back(std::move(*parsed));
    } else {
      profile.unparseable.push_back(why + ": " + line);
    }
  }
  // gProfiler drops a line it cannot read, and its samples with it.
  if (!profile.unparseable.empty()) {
    ADD_FAILURE() << profile.unparseable.size() << " of "
                  << profile.unparseable.size() + profile.lines.size()
                  << " lines gProfiler could not read, the first: "
                  << profile.unparseable.front().substr(0, 400);
  }
  return profile;
}

uint64_t SumCounts(const std::vector<CollapsedLine>& lines) {
  uint64_t total = 0;
  for (const auto& line : lines) total += line.count;
  return total;
}

std::map<std::string, uint64_t> StackCounts(const std::string& text) {
  std::map<std::string, uint64_t> stacks;
  for (const auto& line : ParseCollapsed(text).lines)
    stacks[line.text.substr(0, line.text.rfind(' '))] += line.count;
  return stacks;
}

uint64_t CollapsedProfile::TotalSamples() const { return SumCounts(lines); }

std::vector<CollapsedLine> CollapsedProfile::OfPid(pid_t pid) const {
  std::vector<CollapsedLine> out;
  for (const auto& line : lines)
    if (line.pid == pid) out.push_back(line);
  return out;
}

std::vector<CollapsedLine> CollapsedProfile::OfTid(pid_t tid) const {
  std::vector<CollapsedLine> out;
  for (const auto& line : lines)
    if (line.tid == tid) out.push_back(line);
  return out;
}

std::vector<pid_t> CollapsedProfile::TidsWhere(
    const std::function<bool(const CollapsedLine&)>& pred) const {
  std::vector<pid_t> tids;
  for (const auto& line : lines) {
    if (pred(line) && std::find(tids.begin(), tids.end(), line.tid) == tids.end())
      tids.push_back(line.tid);
  }
  return tids;
}

std::vector<std::string> FramesOfKind(const CollapsedLine& line, FrameKind kind) {
  std::vector<std::string> out;
  for (const auto& frame : line.frames)
    if (KindOf(frame) == kind) out.push_back(frame);
  return out;
}

std::vector<std::string> ErrorMarkers(const CollapsedLine& line) {
  std::vector<std::string> out;
  for (const auto& frame : line.frames)
    if (KindOf(frame) == FrameKind::kError && frame != kTruncationMarker && !IsNativeMarker(frame))
      out.push_back(frame);
  return out;
}

bool IsNativeMarker(const std::string& frame) {
  return KindOf(frame) == FrameKind::kError &&
         (StartsWith(frame, ebpf::pyperf::kNativeStackErrorOpen) ||
          frame == MarkerFrame(ebpf::pyperf::kTruncatedNativeStack) ||
          frame == MarkerFrame(ebpf::pyperf::kEvalLoopNotFound));
}

std::optional<std::string> StartFrameUnderPythonFrame(const CollapsedLine& line) {
  static const std::set<std::string> kStartFunctions = {
      "_start",     "__libc_start_main", "__libc_start_call_main", "Py_BytesMain", "Py_RunMain",
      "Py_Main",    "PyEval_EvalCode",   "start_thread",           "clone3",       "clone",
      "thread_run", "pythread_wrapper",
  };
  bool python = false;
  for (const std::string& frame : line.frames) {
    const FrameKind kind = KindOf(frame);
    if (kind == FrameKind::kPython) python = true;
    if (!python || kind != FrameKind::kNative) continue;
    // "name", or with --insert-dso-name "name (/path)".
    std::string name = frame.substr(0, frame.size() - ebpf::pyperf::kNativeSuffix.size());
    name = name.substr(0, name.find(" ("));
    if (kStartFunctions.count(name)) return frame;
  }
  return std::nullopt;
}

bool IsTruncated(const CollapsedLine& line) {
  return !line.frames.empty() && line.frames.front() == kTruncationMarker;
}

std::optional<std::string> LeafIgnoringNativeAndKernel(const CollapsedLine& line) {
  for (auto it = line.frames.rbegin(); it != line.frames.rend(); ++it) {
    FrameKind kind = KindOf(*it);
    if (kind != FrameKind::kNative && kind != FrameKind::kKernel) return *it;
  }
  return std::nullopt;
}

std::optional<std::string> FrameOrderProblem(const CollapsedLine& line) {
  int highest = -1;
  std::string highest_frame;
  for (size_t i = 0; i < line.frames.size(); ++i) {
    const std::string& frame = line.frames[i];
    int rank = OrderRank(frame);
    if (rank < 0) continue;
    if (rank < highest)
      return "frame " + std::to_string(i) + " \"" + frame + "\" comes after \"" + highest_frame +
             "\"";
    if (frame == kTruncationMarker && i != 0)
      return "the truncation marker is frame " + std::to_string(i) + ", not the first";
    highest = rank;
    highest_frame = frame;
  }
  return std::nullopt;
}

std::optional<std::vector<size_t>> FindInOrder(
    const std::vector<std::string>& frames,
    const std::vector<std::function<bool(const std::string&)>>& matchers) {
  std::vector<size_t> found;
  size_t next = 0;
  for (const auto& matches : matchers) {
    while (next < frames.size() && !matches(frames[next])) ++next;
    if (next == frames.size()) return std::nullopt;
    found.push_back(next++);
  }
  return found;
}

std::string ExpectedModuleOf(const std::string& file) {
  static const std::regex special("^<(frozen )?(.*)>$");
  std::smatch m;
  if (std::regex_match(file, m, special)) return m[1].matched ? m[2].str() : file;
  // Greedy: the last library directory wins (a venv's site-packages lies
  // inside its lib/pythonX.Y).
  static const std::regex library(
      "^.*(/|^)(lib(64)?/python[0-9]+(\\.[0-9]+)?t?/|site-packages/|dist-packages/)");
  // Compiled once: this runs for every Python frame of every dump.
  static const std::regex leading_slashes("^(/|\\./)+");
  static const std::regex py_suffix("\\.py$");
  static const std::regex init_suffix("\\.__init__$");
  std::string rest = std::regex_replace(file, library, "", std::regex_constants::format_first_only);
  rest = std::regex_replace(rest, leading_slashes, "");
  rest = std::regex_replace(rest, py_suffix, "");
  std::replace(rest.begin(), rest.end(), '/', '.');
  return std::regex_replace(rest, init_suffix, "");
}

namespace {

// Parses `frame` as "<name> (<location>)" + the Python suffix, with the name
// ending at `open`.
std::optional<PythonFrame> ParsePythonFrameAt(const std::string& frame, size_t open,
                                              size_t suffix_size, std::string* why) {
  auto fail = [&](const std::string& reason) -> std::optional<PythonFrame> {
    *why = reason;
    return std::nullopt;
  };
  std::string location = frame.substr(open + 2, frame.size() - open - 2 - suffix_size);
  size_t colon = location.rfind(':');
  if (colon == std::string::npos) return fail("no ':' before the line number");
  auto line = ParseDecimal(location.substr(colon + 1));
  if (!line) return fail("the line number is not a number");

  PythonFrame out;
  out.qualified_name = frame.substr(0, open);
  out.file = location.substr(0, colon);
  out.line = static_cast<int>(*line);
  out.module = ExpectedModuleOf(out.file);
  std::string rest = out.qualified_name;
  if (!out.module.empty()) {
    if (!StartsWith(rest, out.module + "."))
      return fail("the name does not start with the module of its file, \"" + out.module + ".\"");
    rest = rest.substr(out.module.size() + 1);
  }
  size_t dot = rest.rfind('.');
  if (dot == std::string::npos) {
    out.function = rest;
  } else {
    out.class_name = rest.substr(0, dot);
    out.function = rest.substr(dot + 1);
  }
  if (out.function.empty()) return fail("an empty function name");
  return out;
}

}  // namespace

std::optional<PythonFrame> ParsePythonFrame(const std::string& frame, std::string* why) {
  const std::string suffix = ")" + std::string(ebpf::pyperf::kPythonSuffix);
  std::string reason;
  if (!EndsWith(frame, suffix)) {
    reason = "not a Python frame (no \"" + suffix + "\" suffix)";
  } else {
    // A file name may itself contain " (", so try each one from the left:
    // the right split is the one whose name starts with the file's module.
    size_t limit = frame.size() - suffix.size();
    for (size_t open = frame.find(" ("); open != std::string::npos && open + 2 <= limit;
         open = frame.find(" (", open + 1)) {
      std::string why_here;
      if (auto parsed = ParsePythonFrameAt(frame, open, suffix.size(), &why_here)) return parsed;
      if (reason.empty()) reason = why_here;
    }
    if (reason.empty()) reason = "no \" (\" before the file";
  }
  if (why) *why = reason + ": " + frame;
  return std::nullopt;
}

std::vector<PythonFrame> PythonFramesOf(const CollapsedLine& line) {
  std::vector<PythonFrame> out;
  for (const auto& frame : line.frames) {
    if (KindOf(frame) != FrameKind::kPython) continue;
    if (auto parsed = ParsePythonFrame(frame)) out.push_back(std::move(*parsed));
  }
  return out;
}

bool IsPythonFunction(const std::string& frame, const std::string& function,
                      const std::optional<std::string>& class_name) {
  auto parsed = ParsePythonFrame(frame);
  if (!parsed || parsed->function != function) return false;
  return !class_name || parsed->class_name == *class_name;
}

std::vector<CollapsedLine> LinesEndingWith(const std::vector<CollapsedLine>& lines,
                                           const std::vector<std::string>& functions, bool rooted) {
  std::vector<CollapsedLine> out;
  for (const auto& line : lines) {
    auto frames = PythonFramesOf(line);
    if (frames.size() < functions.size() || (rooted && frames.size() != functions.size())) continue;
    size_t offset = frames.size() - functions.size();
    bool match = true;
    for (size_t i = 0; i < functions.size() && match; ++i)
      match = frames[offset + i].function == functions[i];
    if (match) out.push_back(line);
  }
  return out;
}

std::function<bool(const CollapsedLine&)> PythonStackEndsWith(std::vector<std::string> functions,
                                                              bool rooted) {
  return [functions = std::move(functions), rooted](const CollapsedLine& line) {
    return !LinesEndingWith({line}, functions, rooted).empty();
  };
}

std::string ExpectedFullName(const std::string& qualified_name, const std::string& file) {
  const std::string module = ExpectedModuleOf(file);
  return module.empty() ? qualified_name : module + "." + qualified_name;
}

std::string ExpectedDisplayName(const std::string& qualified_name, const std::string& file) {
  const std::string module = ExpectedModuleOf(file);
  return module.empty() ? qualified_name
                        : module.substr(module.rfind('.') + 1) + "." + qualified_name;
}

std::string EscapedFrame(const TestFrame& frame, PythonNaming naming) {
  std::string out;
  if (frame.kind == ebpf::pyperf::FrameKind::kPython) {
    ebpf::pyperf::AppendFrameText(naming == PythonNaming::kFullName
                                      ? ExpectedFullName(frame.name, frame.file)
                                      : ExpectedDisplayName(frame.name, frame.file),
                                  &out);
    out += " (";
    ebpf::pyperf::AppendFrameText(frame.file, &out);
    out += ":" + std::to_string(frame.line) + ")";
  } else if (frame.kind == ebpf::pyperf::FrameKind::kTask) {
    // "<task name> (<coroutine>)"
    ebpf::pyperf::AppendFrameText(frame.name, &out);
    out += " (";
    ebpf::pyperf::AppendFrameText(frame.file, &out);
    out += ")";
  } else {
    ebpf::pyperf::AppendFrameText(frame.name, &out);
  }
  return out + std::string(ebpf::pyperf::FrameSuffix(frame.kind));
}

std::string EscapedStack(const TestStack& stack, PythonNaming naming) {
  std::string out = Collapsed(TestStack(stack.comm, stack.pid, stack.tid));
  for (const TestFrame& frame : stack.frames) out += ";" + EscapedFrame(frame, naming);
  return out;
}

std::string DisplayViewOfFrame(const std::string& frame) {
  if (KindOf(frame) != FrameKind::kPython) return frame;
  std::string why;
  std::optional<PythonFrame> python = ParsePythonFrame(frame, &why);
  if (!python) return frame;
  const std::string qualified = python->module.empty()
                                    ? python->qualified_name
                                    : python->qualified_name.substr(python->module.size() + 1);
  return ExpectedDisplayName(qualified, python->file) + " (" + python->file + ":" +
         std::to_string(python->line) + ")" + std::string(ebpf::pyperf::kPythonSuffix);
}

}  // namespace pyperf_test
