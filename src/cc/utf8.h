// UTF-8 for text that comes from outside: other processes' memory, ELF symbol
// tables, /proc. Everything PyPerf prints is strict UTF-8 without NUL bytes,
// so every such string passes through here once, when it is first turned into
// text (names are cached afterwards, never sanitized per sample).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ebpf {

// U+FFFD, the replacement character, in UTF-8.
inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";

// Appends code point `cp` in UTF-8. Surrogates (U+D800..U+DFFF), values above
// U+10FFFF and U+0000 cannot be printed and become U+FFFD.
void AppendCodePoint(uint32_t cp, std::string* out);

// Appends `bytes` as strict UTF-8: each byte that does not start or continue a
// well-formed sequence (overlong forms, surrogates, values above U+10FFFF
// included) becomes one U+FFFD, and NUL becomes U+FFFD. With
// `drop_incomplete_tail`, a sequence cut short by the end of `bytes` (a buffer
// that ended mid-character) is dropped instead of replaced.
void AppendSanitizedUtf8(std::string_view bytes, std::string* out,
                         bool drop_incomplete_tail = false);

// `text` made strict UTF-8 in place (see AppendSanitizedUtf8); cheap when it
// already is.
void SanitizeUtf8InPlace(std::string* text);

// True when `bytes` is strict UTF-8 with no NUL byte.
bool IsPrintableUtf8(std::string_view bytes);

}  // namespace ebpf
