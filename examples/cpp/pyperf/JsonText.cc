// JsonText: see JsonText.h.
#include "JsonText.h"

#include <time.h>

#include <cstdint>
#include <cstdio>

namespace ebpf::pyperf {
namespace {

void AppendUnicodeEscape(uint32_t code, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->append("\\u");
  for (int shift = 12; shift >= 0; shift -= 4) out->push_back(kHex[(code >> shift) & 0xf]);
}

bool IsContinuation(unsigned char c) { return (c & 0xc0) == 0x80; }

// The length of the well-formed UTF-8 sequence starting at `s[i]` (2..4), or 0.
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  auto at = [&](size_t k) -> unsigned char { return i + k < s.size() ? s[i + k] : 0; };
  unsigned char c = at(0);
  if (c >= 0xc2 && c <= 0xdf) return IsContinuation(at(1)) ? 2 : 0;
  if (c >= 0xe0 && c <= 0xef) {
    unsigned char lo = c == 0xe0 ? 0xa0 : 0x80,
                  hi = c == 0xed ? 0x9f : 0xbf;  // no overlongs, no surrogates
    return at(1) >= lo && at(1) <= hi && IsContinuation(at(2)) ? 3 : 0;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    unsigned char lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;  // <= U+10FFFF
    return at(1) >= lo && at(1) <= hi && IsContinuation(at(2)) && IsContinuation(at(3)) ? 4 : 0;
  }
  return 0;
}

}  // namespace

void AppendJsonString(std::string_view text, std::string* out) {
  out->push_back('"');
  for (size_t i = 0; i < text.size();) {
    unsigned char c = text[i];
    if (c < 0x80) {
      // JSON's two-character escapes: kEscaped[k] is written as a backslash
      // and kEscapeLetters[k].
      static constexpr std::string_view kEscaped = "\"\\\n\r\t", kEscapeLetters = "\"\\nrt";
      const size_t escape = kEscaped.find(static_cast<char>(c));
      if (escape != std::string_view::npos) {
        out->push_back('\\');
        out->push_back(kEscapeLetters[escape]);
      } else if (c < 0x20 || c == 0x7f || c == '<' || c == '>' || c == '&') {
        AppendUnicodeEscape(c, out);
      } else {
        out->push_back(static_cast<char>(c));
      }
      ++i;
      continue;
    }
    size_t length = Utf8SequenceLength(text, i);
    if (length == 0) {
      AppendUnicodeEscape(0xfffd, out);  // not UTF-8: one byte at a time
      ++i;
      continue;
    }
    if (length == 3 && c == 0xe2 && static_cast<unsigned char>(text[i + 1]) == 0x80 &&
        (static_cast<unsigned char>(text[i + 2]) & 0xfe) == 0xa8) {
      AppendUnicodeEscape(static_cast<unsigned char>(text[i + 2]) == 0xa8 ? 0x2028 : 0x2029, out);
    } else {
      out->append(text.substr(i, length));
    }
    i += length;
  }
  out->push_back('"');
}

std::string UtcTimeText(std::chrono::system_clock::time_point when, int decimals) {
  const int64_t ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(when.time_since_epoch()).count();
  int64_t seconds = ns / 1000000000, fraction = ns % 1000000000;
  if (fraction < 0) fraction += 1000000000, seconds -= 1;
  if (decimals < 1) decimals = 1;
  if (decimals > 9) decimals = 9;
  for (int d = decimals; d < 9; ++d) fraction /= 10;
  time_t t = static_cast<time_t>(seconds);
  struct tm tm;
  if (gmtime_r(&t, &tm) == nullptr) return "?";
  char text[64];
  size_t n = strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(text + n, sizeof(text) - n, ".%0*dZ", decimals, static_cast<int>(fraction));
  return text;
}

}  // namespace ebpf::pyperf
