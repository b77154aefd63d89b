// Tests of PythonText: raw string bytes as the BPF program copies them
// (PEP 393 kinds, 2.7 byte strings, tp_name) decoded to exact UTF-8, with a
// visible marker when the BPF buffer cut the string.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "PythonText.h"

namespace ebpf::pyperf {
namespace {

const std::string kFFFD = "\xEF\xBF\xBD";

// A BPF buffer of `cap` bytes holding the first bytes of `data`, described
// as a string of `size` bytes in `encoding`.
std::string Decode(const std::string& data, size_t cap, uint8_t encoding, size_t size) {
  std::vector<char> buffer(cap, 0);
  std::memcpy(buffer.data(), data.data(), std::min(cap, data.size()));
  pyperf_text text{};
  text.encoding = encoding;
  text.size = static_cast<uint32_t>(size);
  return DecodePythonText(buffer.data(), cap, text);
}

// Little-endian code units of `cps`, `width` bytes each.
std::string Units(const std::vector<uint32_t>& cps, int width) {
  std::string out;
  for (uint32_t cp : cps)
    for (int i = 0; i < width; ++i) out.push_back(static_cast<char>((cp >> (8 * i)) & 0xFF));
  return out;
}

TEST(PythonText, DecodesEveryPep393Kind) {
  // größe as Latin-1 (kind 1), 计算 as UCS-2, 🔥 as UCS-4.
  EXPECT_EQ(Decode("gr\xF6\xDF"
                   "e",
                   64, PYPERF_TEXT_LATIN1, 5),
            "größe");
  EXPECT_EQ(Decode(Units({0x8BA1, 0x7B97}, 2), 64, PYPERF_TEXT_UCS2, 4), "计算");
  EXPECT_EQ(Decode(Units({'a', 0x1F525}, 4), 64, PYPERF_TEXT_UCS4, 8), "a🔥");
}

TEST(PythonText, Py2BytesAreUtf8WithBadBytesReplaced) {
  EXPECT_EQ(Decode("gr\xC3\xB6\xC3\x9F"
                   "e",
                   64, PYPERF_TEXT_UTF8, 7),
            "größe");
  EXPECT_EQ(Decode("bad\xFF\xFEname", 64, PYPERF_TEXT_UTF8, 9), "bad" + kFFFD + kFFFD + "name");
}

TEST(PythonText, NulAndLoneSurrogatesBecomeReplacementCharacters) {
  EXPECT_EQ(Decode(std::string("a\0b", 3), 64, PYPERF_TEXT_LATIN1, 3), "a" + kFFFD + "b");
  EXPECT_EQ(Decode(Units({'x', 0xDCFF}, 2), 64, PYPERF_TEXT_UCS2, 4), "x" + kFFFD);
  EXPECT_EQ(Decode(Units({0x110000}, 4), 64, PYPERF_TEXT_UCS4, 4), kFFFD);
}

TEST(PythonText, CutStringsEndWithTheMarkerNeverHalfACharacter) {
  // 40 UCS-2 characters (80 bytes) in a 64-byte buffer: 32 kept.
  std::vector<uint32_t> long_bmp(40, 0x957F);
  std::string expected;
  for (int i = 0; i < 32; ++i) expected += "长";
  EXPECT_EQ(Decode(Units(long_bmp, 2), 64, PYPERF_TEXT_UCS2, 80), expected + kTruncatedTextMarker);
  // The same as 2.7 UTF-8 (120 bytes): 21 whole characters fit in 64 bytes.
  std::string utf8;
  for (int i = 0; i < 40; ++i) utf8 += "长";
  std::string expected_utf8;
  for (int i = 0; i < 21; ++i) expected_utf8 += "长";
  EXPECT_EQ(Decode(utf8, 64, PYPERF_TEXT_UTF8, utf8.size()), expected_utf8 + kTruncatedTextMarker);
  // A string that exactly fills the buffer is whole.
  EXPECT_EQ(Decode(std::string(64, 'x'), 64, PYPERF_TEXT_LATIN1, 64), std::string(64, 'x'));
}

TEST(PythonText, NoStringIsEmptyAndAnUnreadableOneSaysSo) {
  EXPECT_EQ(Decode("", 64, PYPERF_TEXT_NONE, 0), "");
  EXPECT_EQ(Decode("", 64, PYPERF_TEXT_UNREADABLE, 0), kUnreadableText);
  EXPECT_EQ(Decode("abc", 64, 3, 3), kUnreadableText);  // not a kind
}

}  // namespace
}  // namespace ebpf::pyperf
