// Tests of src/cc/utf8: what PyPerf prints from bytes it did not choose is
// strict UTF-8, each bad byte one U+FFFD, NUL never.
#include <gtest/gtest.h>

#include <string>

#include "utf8.h"

namespace ebpf {
namespace {

const std::string kFFFD = "\xEF\xBF\xBD";

std::string Sanitized(const std::string& bytes, bool drop_tail = false) {
  std::string out;
  AppendSanitizedUtf8(bytes, &out, drop_tail);
  return out;
}

TEST(Utf8, KeepsValidTextOfEveryLength) {
  for (std::string s : {"", "abc", "größe", "计算", "\xF0\x9F\x90\x8D snake", "\xF4\x8F\xBF\xBF"}) {
    EXPECT_EQ(Sanitized(s), s);
    EXPECT_TRUE(IsPrintableUtf8(s)) << s;
  }
}

TEST(Utf8, ReplacesEachBadByteWithOneReplacementCharacter) {
  EXPECT_EQ(Sanitized("bad\xff\xfename"), "bad" + kFFFD + kFFFD + "name");
  // Latin-1 bytes, as a 2.7 str or a comm may hold them.
  EXPECT_EQ(Sanitized("gr\xf6\xdf"
                      "e"),
            "gr" + kFFFD + kFFFD + "e");
  // A lone continuation byte; a lead byte followed by ASCII.
  EXPECT_EQ(Sanitized("a\x80"
                      "b\xc3"
                      "c"),
            "a" + kFFFD + "b" + kFFFD + "c");
}

TEST(Utf8, RejectsOverlongSurrogateAndOutOfRangeForms) {
  EXPECT_EQ(Sanitized("\xC0\xAF"), kFFFD + kFFFD);              // overlong '/'
  EXPECT_EQ(Sanitized("\xE0\x80\xAF"), kFFFD + kFFFD + kFFFD);  // overlong
  EXPECT_EQ(Sanitized("\xED\xA0\x80"), kFFFD + kFFFD + kFFFD);  // U+D800
  EXPECT_EQ(Sanitized("\xF4\x90\x80\x80"),
            Sanitized("\xF4") + kFFFD + kFFFD + kFFFD);  // > U+10FFFF
  EXPECT_FALSE(IsPrintableUtf8("\xED\xA0\x80"));
}

TEST(Utf8, NulIsNeverPrinted) {
  EXPECT_EQ(Sanitized(std::string("a\0b", 3)), "a" + kFFFD + "b");
  EXPECT_FALSE(IsPrintableUtf8(std::string("a\0b", 3)));
  std::string out;
  AppendCodePoint(0, &out);
  EXPECT_EQ(out, kFFFD);
}

TEST(Utf8, DropsACharacterCutByTheBufferOnlyWhenAsked) {
  std::string cut = "ab\xE8\xAE";  // "ab" + the first two bytes of 计
  EXPECT_EQ(Sanitized(cut, /*drop_tail=*/true), "ab");
  EXPECT_EQ(Sanitized(cut, /*drop_tail=*/false), "ab" + kFFFD + kFFFD);
  // A bad byte at the end is not a cut character: still replaced.
  EXPECT_EQ(Sanitized("ab\xff", true), "ab" + kFFFD);
}

TEST(Utf8, EncodesCodePoints) {
  std::string out;
  for (uint32_t cp : {0x41u, 0xE9u, 0x8BA1u, 0x1F525u, 0xD800u, 0x110000u})
    AppendCodePoint(cp, &out);
  EXPECT_EQ(out, "A\xC3\xA9\xE8\xAE\xA1\xF0\x9F\x94\xA5" + kFFFD + kFFFD);
}

TEST(Utf8, SanitizesInPlace) {
  std::string s = "lib\xff.so";
  SanitizeUtf8InPlace(&s);
  EXPECT_EQ(s, "lib" + kFFFD + ".so");
  std::string ok = "libc.so.6";
  SanitizeUtf8InPlace(&ok);
  EXPECT_EQ(ok, "libc.so.6");
}

}  // namespace
}  // namespace ebpf
