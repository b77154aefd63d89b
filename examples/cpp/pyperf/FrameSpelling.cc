// FrameSpelling: see FrameSpelling.h.
#include "FrameSpelling.h"

#include <cstdio>
#include <utility>

#include "PyPerfBpfShared.h"
#include "PythonFrameFormat.h"

namespace ebpf::pyperf {
namespace {

// The NAME of "[Sample Error <NAME>]".
std::string_view SampleErrorName(uint8_t error) {
  switch (error) {
    case PYPERF_ERROR_NO_OFFSETS:
      return "NO_OFFSETS";
    case PYPERF_ERROR_NO_INTERPRETER:
      return "NO_INTERPRETER";
    case PYPERF_ERROR_THREAD_STATE:
      return "THREAD_STATE";
    case PYPERF_ERROR_TAIL_CALL:
      return "TAIL_CALL";
    case PYPERF_ERROR_FRAME_CYCLE:
      return "FRAME_CYCLE";
    case PYPERF_ERROR_FRAME_UNREADABLE:
      return "FRAME_UNREADABLE";
    default:
      return "UNKNOWN";
  }
}

// The length of the line break starting at s[i], 0 if none. gProfiler reads
// the file with Python's str.splitlines(), which breaks lines not only at
// '\n' and '\r' but at '\v', '\f', '\x1c'-'\x1e', U+0085, U+2028 and
// U+2029: any of them inside a name would cut its line in two.
size_t LineBreakAt(const std::string& s, size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  if (b == '\n' || b == '\r' || b == '\v' || b == '\f' || (b >= 0x1c && b <= 0x1e)) return 1;
  if (b == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x85) return 2;
  if (b == 0xe2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
      (static_cast<unsigned char>(s[i + 2]) == 0xa8 ||
       static_cast<unsigned char>(s[i + 2]) == 0xa9))
    return 3;
  return 0;
}

// Turns ';' and every line break from `start` on into '_' (one '_' for a
// multi-byte one), in place.
void EscapeFrom(size_t start, std::string* out) {
  std::string& s = *out;
  size_t w = start;
  for (size_t r = start; r < s.size();) {
    if (s[r] == kFrameSeparator) {
      s[w++] = '_';
      ++r;
    } else if (size_t n = LineBreakAt(s, r)) {
      s[w++] = '_';
      r += n;
    } else {
      s[w++] = s[r++];
    }
  }
  s.resize(w);
}

// A marker with a variable part: open, `body` (escaped), "]", the suffix.
void AppendBracketedMarker(std::string_view open, std::string_view body, std::string* out) {
  out->append(open);
  AppendFrameText(body, out);
  out->append(kMarkerClose).append(kMarkerSuffix);
}

}  // namespace

std::string_view FrameSuffix(FrameKind kind) {
  switch (kind) {
    case FrameKind::kPython:
      return kPythonSuffix;
    case FrameKind::kNative:
      return kNativeSuffix;
    case FrameKind::kKernel:
      return kKernelSuffix;
    case FrameKind::kTask:
      return kTaskSuffix;
    case FrameKind::kMarker:
      break;
  }
  return kMarkerSuffix;
}

void AppendFrameText(std::string_view text, std::string* out) {
  size_t start = out->size();
  out->append(text.data(), text.size());
  EscapeFrom(start, out);
}

std::string SpellFrame(FrameKind kind, std::string_view text) {
  std::string_view suffix = FrameSuffix(kind);
  std::string out;
  out.reserve(text.size() + suffix.size());
  AppendFrameText(text, &out);
  out.append(suffix.data(), suffix.size());
  return out;
}

std::string SampleErrorFrame(uint8_t error) {
  std::string out;
  AppendBracketedMarker(kSampleErrorOpen, SampleErrorName(error), &out);
  return out;
}

std::string NativeStackErrorFrame(std::string_view what_failed) {
  std::string out;
  AppendBracketedMarker(kNativeStackErrorOpen, what_failed, &out);
  return out;
}

std::string SampleErrorText(uint8_t error) {
  std::string out(kSampleErrorOpen);
  out.append(SampleErrorName(error)).append(kMarkerClose);
  return out;
}

std::string NativeStackErrorText(std::string_view what_failed) {
  std::string out(kNativeStackErrorOpen);
  out.append(what_failed).append(kMarkerClose);
  return out;
}

const std::string& StackSpeller::ModuleOf(StringId file) {
  auto it = modules_.find(file);
  if (it == modules_.end()) it = modules_.emplace(file, PythonModuleName(String(file))).first;
  return it->second;
}

const StackSpeller::Names& StackSpeller::PythonNames(const SampleFrame& frame) {
  const uint64_t key = (uint64_t{frame.name} << 32) | frame.file;
  auto it = python_names_.find(key);
  if (it != python_names_.end()) return it->second;
  const std::string& module = ModuleOf(frame.file);
  const std::string_view qualified = String(frame.name);
  Names names;
  // The display name's file part: the module's last component (a package's
  // __init__.py is named by its directory, a frozen module by its own name).
  const size_t dot = module.rfind('.');
  const std::string_view base = dot == std::string::npos ? std::string_view(module)
                                                         : std::string_view(module).substr(dot + 1);
  // Escaped as a whole: '.' never is, so this is each part escaped.
  for (auto [out, prefix] : {std::pair<std::string*, std::string_view>{&names.full, module},
                             std::pair<std::string*, std::string_view>{&names.display, base}}) {
    if (!prefix.empty()) {
      ebpf::pyperf::AppendFrameText(prefix, out);
      out->push_back('.');
    }
    ebpf::pyperf::AppendFrameText(qualified, out);
  }
  return python_names_.emplace(key, std::move(names)).first->second;
}

std::string_view StackSpeller::Text(StringId id) {
  const std::string_view text = String(id);
  auto it = escaped_.find(id);
  if (it != escaped_.end()) return it->second;
  scratch_.clear();
  ebpf::pyperf::AppendFrameText(text, &scratch_);
  if (scratch_ == text) return text;  // most strings: nothing to keep
  return escaped_.emplace(id, scratch_).first->second;
}

const std::string& StackSpeller::TaskName(const SampleFrame& frame) {
  const uint64_t key = (uint64_t{frame.name} << 32) | frame.file;
  auto it = task_names_.find(key);
  if (it != task_names_.end()) return it->second;
  std::string name;
  ebpf::pyperf::AppendFrameText(String(frame.name), &name);
  name += " (";
  ebpf::pyperf::AppendFrameText(String(frame.file), &name);
  name += ")";
  return task_names_.emplace(key, std::move(name)).first->second;
}

std::string_view StackSpeller::FullName(const SampleFrame& frame) {
  if (frame.kind == FrameKind::kPython) return PythonNames(frame).full;
  if (frame.kind == FrameKind::kTask) return TaskName(frame);
  return Text(frame.name);
}

std::string_view StackSpeller::DisplayName(const SampleFrame& frame) {
  if (frame.kind == FrameKind::kPython) return PythonNames(frame).display;
  if (frame.kind == FrameKind::kTask) return TaskName(frame);
  return Text(frame.name);
}

void StackSpeller::AppendThread(const Sample& sample, std::string* out) const {
  ebpf::pyperf::AppendFrameText(String(sample.comm), out);
  char ids[32];
  int n = snprintf(ids, sizeof(ids), "-%u/%u", sample.pid, sample.tid);
  out->append(ids, static_cast<size_t>(n));
}

void StackSpeller::AppendCollapsedFrame(const SampleFrame& frame, std::string* out) {
  if (frame.kind == FrameKind::kPython) {
    // module.Class.function (file:line), each part escaped ('.' never is).
    out->append(PythonNames(frame).full);
    out->append(" (");
    ebpf::pyperf::AppendFrameText(String(frame.file), out);
    char line[16];
    int n = snprintf(line, sizeof(line), ":%d)", frame.line);
    out->append(line, static_cast<size_t>(n));
  } else if (frame.kind == FrameKind::kTask) {
    out->append(TaskName(frame));
  } else {
    ebpf::pyperf::AppendFrameText(String(frame.name), out);
  }
  out->append(FrameSuffix(frame.kind));
}

void StackSpeller::AppendCollapsedStack(const Sample& sample, std::string* out) {
  AppendThread(sample, out);
  for (const SampleFrame& frame : sample.frames) {
    out->push_back(kFrameSeparator);
    AppendCollapsedFrame(frame, out);
  }
}

}  // namespace ebpf::pyperf
