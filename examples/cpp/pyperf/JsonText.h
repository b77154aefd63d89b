// JsonText: what the JSON the formats for people write (the flame graph
// page's data, speedscope files) spells the same way: string literals and
// times.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace ebpf::pyperf {

// Appends `text` as a JSON string literal, quotes included, in strict UTF-8:
// '"', '\\', control characters, U+2028/U+2029 (line ends in JavaScript
// before ES2019) and '<', '>', '&' (so the text can neither end an HTML
// <script> element nor start markup) are escaped; bytes that are not UTF-8
// (overlong, surrogate, truncated, past U+10FFFF) become U+FFFD, one a byte.
void AppendJsonString(std::string_view text, std::string* out);

// "YYYY-mm-ddTHH:MM:SS" and `decimals` (1..9) digits of the second, then "Z".
std::string UtcTimeText(std::chrono::system_clock::time_point when, int decimals);

}  // namespace ebpf::pyperf
