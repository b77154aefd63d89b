// utf8: see utf8.h.
#include "utf8.h"

namespace ebpf {
namespace {

// Length of the well-formed, non-NUL UTF-8 sequence at the start of `s`: 0 if
// the first byte starts none (or is NUL); -1 if `s` ends before a sequence
// that is well formed so far is complete.
int SequenceLength(std::string_view s) {
  auto byte = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  uint8_t b0 = byte(0);
  if (b0 == 0) return 0;
  if (b0 < 0x80) return 1;
  int len;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    if (b0 == 0xE0) lo = 0xA0;  // no overlong forms
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    if (b0 == 0xF0) lo = 0x90;  // no overlong forms
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;
  }
  for (int i = 1; i < len; ++i) {
    if (static_cast<size_t>(i) >= s.size()) return -1;
    uint8_t b = byte(static_cast<size_t>(i));
    uint8_t min = i == 1 ? lo : 0x80, max = i == 1 ? hi : 0xBF;
    if (b < min || b > max) return 0;
  }
  return len;
}

}  // namespace

void AppendCodePoint(uint32_t cp, std::string* out) {
  if (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
    out->append(kReplacementCharacter);
  } else if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

void AppendSanitizedUtf8(std::string_view bytes, std::string* out, bool drop_incomplete_tail) {
  size_t i = 0;
  while (i < bytes.size()) {
    int len = SequenceLength(bytes.substr(i));
    if (len > 0) {
      out->append(bytes.data() + i, static_cast<size_t>(len));
      i += static_cast<size_t>(len);
    } else if (len < 0 && drop_incomplete_tail) {
      return;
    } else {
      out->append(kReplacementCharacter);
      ++i;
    }
  }
}

bool IsPrintableUtf8(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    int len = SequenceLength(bytes.substr(i));
    if (len <= 0) return false;
    i += static_cast<size_t>(len);
  }
  return true;
}

void SanitizeUtf8InPlace(std::string* text) {
  if (IsPrintableUtf8(*text)) return;
  std::string clean;
  clean.reserve(text->size() + 8);
  AppendSanitizedUtf8(*text, &clean);
  text->swap(clean);
}

}  // namespace ebpf
