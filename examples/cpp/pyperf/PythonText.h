// PythonText: turns the raw string bytes the BPF program copies out of a
// Python process (PEP 393 kinds, 2.7 byte strings, tp_name) into exact UTF-8.
// A string longer than its BPF buffer ends with kTruncatedTextMarker, never
// with half a character; bytes that are not text become U+FFFD.
#pragma once

#include <cstddef>
#include <string>

#include "PyPerfBpfShared.h"

namespace ebpf::pyperf {

// Appended to a string the BPF buffer could not hold whole.
inline constexpr char kTruncatedTextMarker[] = "[truncated]";
// Stands for a string object whose text could not be read (freed or corrupt
// memory).
inline constexpr char kUnreadableText[] = "[unreadable]";

// Decodes `text` from `buffer`, of which the first `usable` bytes may hold
// string data (the BPF buffer's size, or one less for a NUL-terminated copy).
// Latin-1, UCS-2 and UCS-4 are decoded code point by code point (surrogates
// and NUL become U+FFFD); UTF-8 bytes are checked, each bad byte becoming
// U+FFFD and a character cut by the buffer's end being dropped before the
// marker.
std::string DecodePythonText(const char* buffer, size_t usable, const pyperf_text& text);

}  // namespace ebpf::pyperf
