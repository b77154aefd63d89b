// PythonText: see PythonText.h.
#include "PythonText.h"

#include <string_view>

#include "utf8.h"

namespace ebpf::pyperf {

std::string DecodePythonText(const char* buffer, size_t usable, const pyperf_text& text) {
  std::string out;
  switch (text.encoding) {
    case PYPERF_TEXT_NONE:
      return out;
    case PYPERF_TEXT_LATIN1:
    case PYPERF_TEXT_UCS2:
    case PYPERF_TEXT_UCS4:
    case PYPERF_TEXT_UTF8:
      break;
    default:
      return kUnreadableText;
  }
  size_t size = text.size;
  bool truncated = size > usable;
  size_t available = truncated ? usable : size;
  const auto* bytes = reinterpret_cast<const unsigned char*>(buffer);
  if (text.encoding == PYPERF_TEXT_UTF8) {
    AppendSanitizedUtf8(std::string_view(buffer, available), &out,
                        /*drop_incomplete_tail=*/truncated);
  } else {
    size_t width = text.encoding;
    out.reserve(available);
    for (size_t i = 0; i + width <= available; i += width) {
      uint32_t cp = bytes[i];  // little-endian, as CPython stores them on x86-64
      if (width >= 2) cp |= static_cast<uint32_t>(bytes[i + 1]) << 8;
      if (width == 4) {
        cp |= static_cast<uint32_t>(bytes[i + 2]) << 16;
        cp |= static_cast<uint32_t>(bytes[i + 3]) << 24;
      }
      AppendCodePoint(cp, &out);
    }
  }
  if (truncated) out.append(kTruncatedTextMarker);
  return out;
}

}  // namespace ebpf::pyperf
