// The flamegraph format (FlameGraphEncoder.h): the page's structure and
// escaping on synthetic dumps (every frame kind, hostile names, a deep stack,
// an unparseable stack, bytes that are not UTF-8), the page in chromium
// through its real UI (no console errors or network requests, the data's
// collapsed round trip, a frame's tooltip figures, click-to-zoom, search, no
// hostile name ever executing). Real PyPerf runs on every interpreter layout:
// Formats.FlameGraphOfEveryLayoutWorksInChromium (test_e2e_versions.cc) and
// the demo's page (test_e2e_demo.cc).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "FlameGraphEncoder.h"
#include "FrameSpelling.h"
#include "ProfileEncoder.h"
#include "support/collapsed.h"
#include "support/encoded_dump.h"
#include "support/flamegraph_page.h"
#include "support/test_support.h"

namespace pyperf_test {
namespace {

using pyperf::FrameKind;
using pyperf::SpellFrame;
using Stacks = std::map<std::string, uint64_t>;

const std::string kScriptInjection = "</script><script>alert(1)</script>";
const std::string kImgInjection = "<img src=x onerror=alert(2)>";

constexpr uint64_t kPeriodNs = 10101010;

// Dumps `stacks` with the flamegraph encoder, as ProfileOutput does.
std::string Encode(const Stacks& stacks, uint64_t period_ns = kPeriodNs) {
  SyntheticDump dump(DumpStacks(stacks.begin(), stacks.end()), period_ns);
  return EncodeDump(pyperf::ProfileFormat::kFlameGraph, dump.profile());
}

// Writes that page to `path`.
bool WritePage(const Stacks& stacks, const std::string& path, uint64_t period_ns = kPeriodNs) {
  SyntheticDump dump(DumpStacks(stacks.begin(), stacks.end()), period_ns);
  return EncodeDumpToFile(pyperf::ProfileFormat::kFlameGraph, dump.profile(), path);
}

std::string Py(const std::string& name, int line = 7) {
  return SpellFrame(FrameKind::kPython,
                    name + " (/srv/app/" + "mod.py:" + std::to_string(line) + ")");
}

// A Python frame spelled by hand: SpellFrame would turn U+2028 and some
// control characters into '_', and the encoder must cope with them anyway.
std::string RawPy(const std::string& name) {
  return name + " (/srv/app/mod.py:7)" + std::string(pyperf::kPythonSuffix);
}

size_t Occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The text of the page's data element.
std::string DataElement(const std::string& page) {
  const std::string open = "<script type=\"application/json\" id=\"pyperf-profile\">";
  size_t start = page.find(open);
  if (start == std::string::npos) return "";
  start += open.size();
  size_t end = page.find("</script>", start);
  return end == std::string::npos ? "" : page.substr(start, end - start);
}

// A dump with every frame kind, hostile names, a 200-frame stack and an
// unparseable stack. The hostile Python frame has 5 samples of 100.
Stacks HostileStacks() {
  const std::string head = "python3-100/101;";
  const std::string main = Py("app.main", 3) + ";";
  Stacks stacks;
  stacks[head + main + Py("app." + kScriptInjection, 9)] = 5;
  stacks[head + main + Py("app.quote\"s'and\\back\\slash")] = 4;
  stacks[head + main + RawPy("app.sep\u2028line\u2029para")] = 3;
  stacks[head + main + Py("app.emoji_\U0001F525_rtl_\u05e9\u05dc\u05d5\u05dd")] = 3;
  stacks[head + main + RawPy("app.ctl\x01\x1f\x7f_&amp_" + kImgInjection)] = 2;
  stacks[head + main + SpellFrame(FrameKind::kNative, "PyEval_EvalFrameDefault") + ";" +
         SpellFrame(FrameKind::kNative, "libc.so.6+0x1f2a3") + ";" +
         SpellFrame(FrameKind::kKernel, "do_syscall_64") + ";" +
         SpellFrame(FrameKind::kKernel, "__x64_sys_read")] = 20;
  stacks[head + SpellFrame(FrameKind::kMarker, pyperf::kTruncatedPythonStack) + ";" +
         Py("app.deep")] = 6;
  stacks[head + pyperf::NativeStackErrorFrame("unw_step failed: -7")] = 2;
  stacks[head + pyperf::SampleErrorFrame(3)] = 1;
  std::string deep = "python3-100/102";
  for (int i = 0; i < 200; ++i) deep += ";" + Py("app.recurse", i + 1);
  stacks[deep] = 40;
  stacks["weird comm-with-dash/x-200/200;" + Py("other.main")] = 10;
  // No known suffix on its last frame: ParseStackText rejects it.
  stacks["python3-100/101;" + Py("app.main", 3) + ";no_suffix_frame"] = 3;
  stacks["python3-0100/101;" + Py("app.main", 3)] = 1;  // non-canonical pid
  return stacks;
}

uint64_t Total(const Stacks& stacks) {
  uint64_t total = 0;
  for (const auto& entry : stacks) total += entry.second;
  return total;
}

TEST(FlameGraphEncoder, WritesOneSelfContainedPageWithItsDataAsJson) {
  std::string page = Encode({{"python3-1/1;" + Py("app.main"), 1}});
  EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(Occurrences(page, "@@PYPERF_"), 0u) << "a placeholder left in the page";
  EXPECT_EQ(Occurrences(page, "<script type=\"application/json\" id=\"pyperf-profile\">"), 1u);
  EXPECT_NE(page.find("window.pyperfFlameGraph"), std::string::npos);
  EXPECT_NE(page.find("id=\"search\""), std::string::npos);
  // Offline: nothing that would fetch.
  for (const char* fetch : {"http:", "https:", "<link", "src=", "url(", "@import"})
    EXPECT_EQ(page.find(fetch), std::string::npos) << fetch;
  std::string data = DataElement(page);
  EXPECT_NE(data.find("\"totalSamples\":1"), std::string::npos) << data;
  EXPECT_NE(data.find("\"periodNs\":10101010"), std::string::npos) << data;
  EXPECT_NE(data.find("\"start\":\"2025-12-03T13:53:20.00Z\""), std::string::npos) << data;
  EXPECT_NE(data.find("\"end\":\"2025-12-03T13:54:20.00Z\""), std::string::npos) << data;
  EXPECT_NE(data.find("app.main (/srv/app/mod.py:7)"), std::string::npos) << data;
}

TEST(FlameGraphEncoder, HostileNamesCannotCloseTheScriptOrBreakTheJavaScript) {
  std::string page = Encode(HostileStacks());
  EXPECT_FALSE(FirstNonUtf8Byte(page).has_value()) << "the page is not strict UTF-8";
  // The data element and the page's own script: the only two script ends.
  EXPECT_EQ(Occurrences(page, "</script>"), 2u);
  EXPECT_EQ(Occurrences(page, "<script"), 2u);
  EXPECT_EQ(page.find("<img"), std::string::npos);
  EXPECT_EQ(page.find("\u2028"), std::string::npos) << "a raw U+2028 would end a JS line";
  EXPECT_EQ(page.find("\u2029"), std::string::npos);
  for (char c = 1; c < 0x20; ++c) {
    if (c != '\n' && c != '\t') {
      EXPECT_EQ(page.find(c), std::string::npos) << int(c);
    }
  }
  std::string data = DataElement(page);
  EXPECT_NE(data.find("app.\\u003c/script\\u003e\\u003cscript\\u003ealert(1)"), std::string::npos);
  EXPECT_NE(data.find("quote\\\"s'and\\\\back\\\\slash"), std::string::npos);
  EXPECT_NE(data.find("sep\\u2028line\\u2029para"), std::string::npos);
  EXPECT_NE(data.find("ctl\\u0001\\u001f\\u007f_\\u0026amp_\\u003cimg"), std::string::npos);
  EXPECT_NE(data.find("emoji_\U0001F525_rtl_\u05e9\u05dc\u05d5\u05dd"), std::string::npos)
      << "other characters stay as they are";
  // The unparseable stacks: under the marker node, their texts kept.
  EXPECT_NE(data.find("[6,\"[Unparseable Stack]\"]"), std::string::npos);
  EXPECT_NE(data.find(";no_suffix_frame\",3]"), std::string::npos);
  EXPECT_NE(data.find("\"python3-0100/101;"), std::string::npos);
}

TEST(FlameGraphEncoder, BytesThatAreNotUtf8BecomeReplacementCharacters) {
  // Stack texts are UTF-8 by FrameSpelling's promise; the page stays strict
  // UTF-8 even if one is not (overlong, surrogate, truncated sequence).
  std::string bad = "python3-1/1;" + SpellFrame(FrameKind::kNative,
                                                "a\xc0\xaf"
                                                "b\xed\xa0\x80"
                                                "c\xe2\x82");
  std::string page = Encode({{bad, 2}});
  EXPECT_FALSE(FirstNonUtf8Byte(page).has_value());
  EXPECT_NE(DataElement(page).find("a\\ufffd\\ufffdb\\ufffd\\ufffd\\ufffdc\\ufffd\\ufffd"),
            std::string::npos)
      << DataElement(page);
}

TEST(FlameGraphEncoder, MergesStacksIntoATreeSharingPrefixes) {
  // 20k distinct stacks of 30 frames share most of their frames: the data
  // holds each distinct frame text once.
  Stacks stacks;
  for (int i = 0; i < 20000; ++i) {
    std::string stack = "python3-7/" + std::to_string(8 + i % 4);
    for (int d = 0; d < 29; ++d) stack += ";" + Py("lib.level" + std::to_string(d), d + 1);
    stack += ";" + Py("lib.leaf" + std::to_string(i), 1);
    stacks[stack] = 1 + i % 3;
  }
  std::string page = Encode(stacks);
  EXPECT_EQ(Occurrences(page, "lib.level5 ("), 1u);
  EXPECT_LT(page.size(), 4u << 20) << "the tree should share prefixes";
}

// Checks the page in chromium; skips (fails in strict mode) without it.
#define CHECK_PAGE_OR_SKIP(result, ...)                                      \
  if (auto why = FlameGraphConsumerUnavailable()) PYPERF_SKIP_OR_FAIL(*why); \
  FlameGraphPageResult result = CheckFlameGraphPage(__VA_ARGS__);            \
  ASSERT_EQ(result.error, "");                                               \
  for (const auto& problem : result.console_errors) ADD_FAILURE() << "page: " << problem

TEST(FlameGraphPage, HostileFrameShowsItsShareZoomsAndNeverExecutes) {
  TempDir dir;
  const std::string html = dir.File("hostile.html");
  const Stacks stacks = HostileStacks();
  ASSERT_TRUE(WritePage(stacks, html));
  const std::vector<std::string> path = {"python3-100", "101", Py("app.main", 3),
                                         Py("app." + kScriptInjection, 9)};
  CHECK_PAGE_OR_SKIP(page, html, path, "alert(", dir.File("hostile.png"));
  EXPECT_EQ(page.collapsed, stacks) << "the page's data turned back into collapsed stacks";
  EXPECT_TRUE(page.found);
  EXPECT_EQ(page.samples, 5u);
  EXPECT_NEAR(page.percent, 100.0 * 5 / Total(stacks), 0.0006);
  EXPECT_TRUE(page.zoomed);
  // Both injection frames hold "alert(" (the script one and the img one).
  EXPECT_EQ(page.search_matches, 2u);
  EXPECT_TRUE(FileExists(dir.File("hostile.png")));
}

TEST(FlameGraphPage, DeepStackLeafAndUnicodeSearch) {
  TempDir dir;
  const std::string html = dir.File("deep.html");
  const Stacks stacks = HostileStacks();
  ASSERT_TRUE(WritePage(stacks, html));
  std::vector<std::string> path = {"python3-100", "102"};
  for (int i = 0; i < 200; ++i) path.push_back(Py("app.recurse", i + 1));
  CHECK_PAGE_OR_SKIP(page, html, path, "\U0001F525_rtl_\u05e9", "");
  EXPECT_TRUE(page.found);
  EXPECT_EQ(page.samples, 40u);
  EXPECT_NEAR(page.percent, 100.0 * 40 / Total(stacks), 0.0006);
  EXPECT_TRUE(page.zoomed);
  EXPECT_EQ(page.search_matches, 1u);
}

TEST(FlameGraphPage, UnparseableStacksAreOneMarkerNode) {
  TempDir dir;
  const std::string html = dir.File("unparseable.html");
  const Stacks stacks = HostileStacks();
  ASSERT_TRUE(WritePage(stacks, html));
  CHECK_PAGE_OR_SKIP(page, html,
                     {pyperf::SpellFrame(pyperf::FrameKind::kMarker, pyperf::kUnparseableStack)},
                     "sep\u2028line", "");
  EXPECT_TRUE(page.found);
  EXPECT_EQ(page.samples, 4u) << "the two rejected stacks' 3 + 1 samples";
  EXPECT_EQ(page.search_matches, 1u);
}

TEST(FlameGraphPage, TwentyThousandStacksStayUsable) {
  TempDir dir;
  const std::string html = dir.File("big.html");
  Stacks stacks;
  for (int i = 0; i < 20000; ++i) {
    std::string stack = "python3-7/" + std::to_string(8 + i % 4);
    for (int d = 0; d < 20; ++d)
      stack += ";" + Py("lib.f" + std::to_string(d * 7 + i % (d + 2)), d + 1);
    stacks[stack] += 1 + i % 5;
  }
  ASSERT_TRUE(WritePage(stacks, html));
  uint64_t thread8 = 0;
  for (const auto& [stack, count] : stacks)
    if (stack.rfind("python3-7/8;", 0) == 0) thread8 += count;
  CHECK_PAGE_OR_SKIP(page, html, {"python3-7", "8"}, "lib.f0 (", "");
  EXPECT_EQ(page.collapsed, stacks);
  EXPECT_EQ(page.samples, thread8);
  EXPECT_NEAR(page.percent, 100.0 * thread8 / Total(stacks), 0.0006);
  EXPECT_TRUE(page.zoomed);
  EXPECT_EQ(page.search_matches, 2u) << "lib.f0 is the first frame of threads 8 and 10";
}

TEST(FlameGraphPage, EmptyDumpIsAValidPage) {
  TempDir dir;
  const std::string html = dir.File("empty.html");
  ASSERT_TRUE(WritePage({}, html, 0));
  CHECK_PAGE_OR_SKIP(page, html, {"python3-1"}, "x", "");
  EXPECT_FALSE(page.found);
  EXPECT_TRUE(page.collapsed.empty());
  EXPECT_EQ(page.search_matches, 0u);
}

}  // namespace
}  // namespace pyperf_test
