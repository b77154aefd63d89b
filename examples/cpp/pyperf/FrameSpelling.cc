// FrameSpelling: see FrameSpelling.h.
#include "FrameSpelling.h"

#include <cstdio>
#include <cstring>

#include "PyPerfBpfShared.h"
#include "utf8.h"

namespace pyperf {
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

void StackText::Start(const char* comm, size_t comm_size, uint32_t pid, uint32_t tid) {
  text_.clear();
  // The thread's comm: bytes the process chose (prctl, /proc/self/comm).
  std::string_view bytes(comm, strnlen(comm, comm_size));
  if (IsPrintableUtf8(bytes)) {
    AppendFrameText(bytes, &text_);
  } else {
    size_t start = text_.size();
    AppendSanitizedUtf8(bytes, &text_);
    EscapeFrom(start, &text_);
  }
  char ids[32];  // no allocation per sample
  int n = snprintf(ids, sizeof(ids), "-%u/%u", pid, tid);
  text_.append(ids, static_cast<size_t>(n));
}

void StackText::Add(FrameKind kind, std::string_view text) {
  text_.push_back(kFrameSeparator);
  AppendFrameText(text, &text_);
  std::string_view suffix = FrameSuffix(kind);
  text_.append(suffix.data(), suffix.size());
}

void StackText::EnsureFrame() {
  // The first token never holds ';' (escaped): the first one starts a frame.
  if (text_.find(kFrameSeparator) == std::string::npos) AddMarker(kNoFrames);
}

void StackText::AddSpelled(std::string_view frame) {
  text_.push_back(kFrameSeparator);
  text_.append(frame.data(), frame.size());
}

void StackText::AddSampleError(uint8_t error) {
  text_.push_back(kFrameSeparator);
  AppendBracketedMarker(kSampleErrorOpen, SampleErrorName(error), &text_);
}

void StackText::AddKernelAddress(uint64_t address) {
  char buf[32];
  snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(address));
  Add(FrameKind::kKernel, buf);
}

void StackText::AddNativeFrames(const std::vector<NativeFrame>& leaf_first,
                                const NativeUnwindResult& result) {
  if (result.truncated) AddMarker(kTruncatedNativeStack);
  // Names are UTF-8 already (the unwinder sanitizes them once, when cached).
  for (auto it = leaf_first.rbegin(); it != leaf_first.rend(); ++it) {
    if (it->error) {
      text_.push_back(kFrameSeparator);
      AppendBracketedMarker(kNativeStackErrorOpen, it->name, &text_);
    } else {
      Add(FrameKind::kNative, it->name);
    }
  }
}

namespace {

bool ParseDecimal(std::string_view digits, uint32_t* out) {
  if (digits.empty() || digits.size() > 10) return false;
  uint64_t value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  if (value > UINT32_MAX) return false;
  *out = static_cast<uint32_t>(value);
  return true;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

bool ParseStackText(std::string_view stack, StackHead* head, std::vector<SpelledFrame>* frames) {
  frames->clear();
  size_t end = stack.find(kFrameSeparator);
  std::string_view first = stack.substr(0, end);
  // "<comm>-<pid>/<tid>": the comm may hold '-' and '/', the ids cannot.
  size_t slash = first.rfind('/');
  if (slash == std::string_view::npos) return false;
  size_t dash = first.rfind('-', slash);
  if (dash == std::string_view::npos) return false;
  if (!ParseDecimal(first.substr(dash + 1, slash - dash - 1), &head->pid) ||
      !ParseDecimal(first.substr(slash + 1), &head->tid))
    return false;
  head->comm = first.substr(0, dash);
  while (end != std::string_view::npos) {
    size_t start = end + 1;
    end = stack.find(kFrameSeparator, start);
    std::string_view frame = stack.substr(start, end == std::string_view::npos ? end : end - start);
    SpelledFrame parsed;
    bool known = false;
    for (FrameKind kind :
         {FrameKind::kPython, FrameKind::kNative, FrameKind::kKernel, FrameKind::kMarker}) {
      std::string_view suffix = FrameSuffix(kind);
      if (EndsWith(frame, suffix)) {
        parsed.kind = kind;
        parsed.text = frame.substr(0, frame.size() - suffix.size());
        known = true;
        break;
      }
    }
    if (!known) return false;
    frames->push_back(parsed);
  }
  return true;
}

}  // namespace pyperf
