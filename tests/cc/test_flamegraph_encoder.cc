// The flamegraph format (FlameGraphEncoder.h): the page's structure, names and
// escaping on synthetic dumps (every frame kind, hostile names, a deep stack,
// bytes that are not UTF-8), its tree merging frames by identity, the page in
// chromium through its real UI (no console errors or network requests, the
// data turned back into stacks, a frame's label, tooltip and figures,
// click-to-zoom, search, no hostile name ever executing). Real PyPerf runs on
// every interpreter layout: Formats.FlameGraphOfEveryLayoutWorksInChromium
// (test_e2e_versions.cc) and the demo's page (test_e2e_demo.cc).
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
#include "support/test_stack.h"
#include "support/test_support.h"

namespace pyperf_test {
namespace {

using Stacks = std::map<std::string, uint64_t>;

const std::string kScriptInjection = "</script><script>alert(1)</script>";
const std::string kImgInjection = "<img src=x onerror=alert(2)>";
// Every Python frame here is in this file: module "srv.app.mod", so a frame
// of "f" is "mod.f" on its box and "srv.app.mod.f (/srv/app/mod.py:7)" in
// its tooltip.
const std::string kFile = "/srv/app/mod.py";

constexpr uint64_t kPeriodNs = 10101010;

// Dumps `stacks` with the flamegraph encoder, as ProfileOutput does.
std::string Encode(const DumpStacks& stacks, uint64_t period_ns = kPeriodNs) {
  SyntheticDump dump(stacks, period_ns);
  return EncodeDump(ebpf::pyperf::ProfileFormat::kFlameGraph, dump.profile());
}

// Writes that page to `path`.
bool WritePage(const DumpStacks& stacks, const std::string& path, uint64_t period_ns = kPeriodNs) {
  SyntheticDump dump(stacks, period_ns);
  return EncodeDumpToFile(ebpf::pyperf::ProfileFormat::kFlameGraph, dump.profile(), path);
}

TestStack Thread(uint32_t tid, const std::string& comm = "python3", uint32_t pid = 100) {
  return TestStack(comm, pid, tid);
}

// What the page's data turns back into (FlameGraphPageResult::collapsed).
Stacks PageStacks(const DumpStacks& stacks) {
  Stacks out;
  for (const auto& [stack, count] : stacks)
    out[EscapedStack(stack, PythonNaming::kFullName)] += count;
  return out;
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

// The stack with the hostile Python frame (5 samples of the dump's 100).
TestStack HostileStack() {
  return Thread(101).Python("main", kFile, 3).Python("inject" + kScriptInjection, kFile, 9);
}

// A deep stack: 200 frames of recurse.
TestStack DeepStack() {
  TestStack deep = Thread(102);
  for (int i = 0; i < 200; ++i) deep.Python("recurse", kFile, i + 1);
  return deep;
}

// A dump with every frame kind, hostile names (the page shows them escaped as
// the collapsed text escapes them: ';' and line breaks are '_'; everything
// else, markup and quotes included, is the page's to make safe) and a
// 200-frame stack.
DumpStacks HostileStacks() {
  auto main = [] { return Thread(101).Python("main", kFile, 3); };
  return {
      {HostileStack(), 5},
      {main().Python("quote\"s'and\\back\\slash", kFile, 7), 4},
      {main().Python("sep\u2028line\u2029para;semi\nnewline", kFile, 7), 3},
      {main().Python("emoji_\U0001F525_rtl_\u05e9\u05dc\u05d5\u05dd", kFile, 7), 3},
      {main().Python("ctl\x01\x1f\x7f_&amp_" + kImgInjection, kFile, 7), 2},
      {main()
           .Native("PyEval_EvalFrameDefault", "/usr/lib/libpython3.11.so", "", 0x1234)
           .Native("libc.so.6+0x1f2a3")
           .Kernel("do_syscall_64")
           .Kernel("__x64_sys_read"),
       20},
      {Thread(101)
           .Marker(std::string(ebpf::pyperf::kTruncatedPythonStack))
           .Python("deep", kFile, 7),
       6},
      {Thread(101).Marker(ebpf::pyperf::NativeStackErrorText("unw_step failed: -7")), 2},
      {Thread(101).Marker(ebpf::pyperf::SampleErrorText(3)), 1},
      {DeepStack(), 40},
      // --native-frames interleaved: kinds alternate from root to leaf.
      {Thread(103)
           .Native("_start")
           .Native("main")
           .Python("outer", kFile, 3)
           .Native("list_sort_impl")
           .Python("key", kFile, 9)
           .Native("leaf_c"),
       7},
      {Thread(200, "weird comm-with-dash/x", 200).Python("other", kFile, 7), 14},
      // --async-tasks: a task chain at the root.
      {Thread(104).Task("request-7", "handle").Python("handle", kFile, 4), 3},
  };
}

uint64_t Total(const DumpStacks& stacks) {
  uint64_t total = 0;
  for (const auto& entry : stacks) total += entry.second;
  return total;
}

TEST(FlameGraphEncoder, WritesOneSelfContainedPageWithItsDataAsJson) {
  std::string page = Encode({{Thread(1).Python("main", kFile, 7), 1}});
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
  // A Python frame: kind 3, its label, its title.
  EXPECT_NE(data.find("[3,\"mod.main\",\"srv.app.mod.main (/srv/app/mod.py:7)\"]"),
            std::string::npos)
      << data;
  EXPECT_NE(data.find("[1,\"python3-100\"],[2,\"1\"]"), std::string::npos) << data;
}

TEST(FlameGraphEncoder, PythonBoxShowsItsFileAndFunctionAndItsTooltipTheFullName) {
  const std::string file = "/srv/bcc-pyperf/examples/cpp/pyperf/demo/demo_workload.py";
  std::string data =
      DataElement(Encode({{Thread(1).Python("RequestHandler.handle", file, 14), 3}}));
  EXPECT_NE(data.find("[3,\"demo_workload.RequestHandler.handle\",\"srv.bcc-pyperf.examples.cpp."
                      "pyperf.demo.demo_workload.RequestHandler.handle (/srv/bcc-pyperf/examples/"
                      "cpp/pyperf/demo/demo_workload.py:14)\"]"),
            std::string::npos)
      << data;
}

TEST(FlameGraphEncoder, OtherFramesAreNamedByTheirText) {
  std::string data = DataElement(Encode({{Thread(1)
                                              .Native("PyObject_Call", "/lib/libpython.so")
                                              .Kernel("do_syscall_64")
                                              .Marker(std::string(ebpf::pyperf::kLostSymbol)),
                                          1}}));
  EXPECT_NE(data.find("[4,\"PyObject_Call\"],[5,\"do_syscall_64\"],[6,\"[Lost Symbol]\"]"),
            std::string::npos)
      << data;
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
  EXPECT_NE(data.find("mod.inject\\u003c/script\\u003e\\u003cscript\\u003ealert(1)"),
            std::string::npos);
  EXPECT_NE(data.find("quote\\\"s'and\\\\back\\\\slash"), std::string::npos);
  EXPECT_NE(data.find("sep_line_para_semi_newline"), std::string::npos)
      << "names are escaped as the collapsed text escapes them";
  EXPECT_EQ(data.find("\\u2028"), std::string::npos) << "no line break reaches the page";
  EXPECT_NE(data.find("ctl\\u0001\\u001f\\u007f_\\u0026amp_\\u003cimg"), std::string::npos);
  EXPECT_NE(data.find("emoji_\U0001F525_rtl_\u05e9\u05dc\u05d5\u05dd"), std::string::npos)
      << "other characters stay as they are";
}

TEST(FlameGraphEncoder, BytesThatAreNotUtf8BecomeReplacementCharacters) {
  // Names are UTF-8 by the sample assembler's promise; the page stays strict
  // UTF-8 even if one is not (overlong, surrogate, truncated sequence).
  std::string page = Encode({{Thread(1).Native("a\xc0\xaf"
                                               "b\xed\xa0\x80"
                                               "c\xe2\x82"),
                              2}});
  EXPECT_FALSE(FirstNonUtf8Byte(page).has_value());
  EXPECT_NE(DataElement(page).find("a\\ufffd\\ufffdb\\ufffd\\ufffd\\ufffdc\\ufffd\\ufffd"),
            std::string::npos)
      << DataElement(page);
}

TEST(FlameGraphEncoder, MergesStacksIntoATreeSharingPrefixes) {
  // 20k distinct stacks of 30 frames share most of their frames: the data
  // holds each distinct frame once.
  DumpStacks stacks;
  for (int i = 0; i < 20000; ++i) {
    TestStack stack = Thread(8 + i % 4, "python3", 7);
    for (int d = 0; d < 29; ++d) stack.Python("level" + std::to_string(d), kFile, d + 1);
    stack.Python("leaf" + std::to_string(i), kFile, 1);
    stacks.push_back({stack, 1 + i % 3});
  }
  std::string page = Encode(stacks);
  EXPECT_EQ(Occurrences(page, "\"mod.level5\""), 1u);
  EXPECT_LT(page.size(), 4u << 20) << "the tree should share prefixes";
}

// Two frames of one display name in two files, and in one file at two lines,
// are three boxes.
DumpStacks SameDisplayNameStacks() {
  return {{Thread(1).Python("Handler.run", "/a/app/util.py", 5), 2},
          {Thread(1).Python("Handler.run", "/b/lib/util.py", 5), 3},
          {Thread(1).Python("Handler.run", "/b/lib/util.py", 6), 4}};
}

TEST(FlameGraphEncoder, FramesOfOneDisplayNameInTwoFilesOrLinesAreSeparateBoxes) {
  std::string data = DataElement(Encode(SameDisplayNameStacks()));
  EXPECT_EQ(Occurrences(data, "\"util.Handler.run\""), 3u) << data;
  EXPECT_NE(data.find("\"a.app.util.Handler.run (/a/app/util.py:5)\""), std::string::npos);
  EXPECT_NE(data.find("\"b.lib.util.Handler.run (/b/lib/util.py:5)\""), std::string::npos);
  EXPECT_NE(data.find("\"b.lib.util.Handler.run (/b/lib/util.py:6)\""), std::string::npos);
}

// memcpy at two addresses of libc and in another file: one box under main;
// the kernel's memcpy another.
DumpStacks NativeAddressStacks() {
  auto main = [] { return Thread(1).Python("main", kFile, 3); };
  return {{main().Native("memcpy", "/lib/libc.so.6", "ab12", 0x100), 2},
          {main().Native("memcpy", "/lib/libc.so.6", "ab12", 0x200), 3},
          {main().Native("memcpy", "/lib/other.so", "", 0x300), 4},
          {main().Kernel("memcpy"), 1}};
}

TEST(FlameGraphEncoder, NativeFramesThatDifferOnlyInAddressAreOneBox) {
  std::string data = DataElement(Encode(NativeAddressStacks()));
  EXPECT_EQ(Occurrences(data, "[4,\"memcpy\"]"), 1u) << data;
  EXPECT_EQ(Occurrences(data, "[5,\"memcpy\"]"), 1u) << data;
  // root, process, thread, main, then (in the collapsed lines' order,
  // "memcpy_[k]" before "memcpy_[pn]") the kernel's memcpy and the native one.
  EXPECT_NE(data.find("\"nodes\":[-1,0,0,0,1,0,1,2,0,2,3,0,3,4,1,3,5,9]"), std::string::npos)
      << data;
}

// Checks the page in chromium; skips (fails in strict mode) without it.
#define CHECK_PAGE_OR_SKIP(result, ...)                                      \
  if (auto why = FlameGraphConsumerUnavailable()) PYPERF_SKIP_OR_FAIL(*why); \
  FlameGraphPageResult result = CheckFlameGraphPage(__VA_ARGS__);            \
  ASSERT_EQ(result.error, "");                                               \
  EXPECT_EQ(result.legend_missing, "");                                      \
  for (const auto& problem : result.console_errors) ADD_FAILURE() << "page: " << problem

TEST(FlameGraphPage, HostileFrameShowsItsShareZoomsAndNeverExecutes) {
  TempDir dir;
  const std::string html = dir.File("hostile.html");
  const DumpStacks stacks = HostileStacks();
  ASSERT_TRUE(WritePage(stacks, html));
  CHECK_PAGE_OR_SKIP(page, html, FlameGraphNodePath(HostileStack(), 2), "alert(",
                     dir.File("hostile.png"));
  EXPECT_EQ(page.collapsed, PageStacks(stacks)) << "the page's data turned back into stacks";
  EXPECT_TRUE(page.found);
  EXPECT_EQ(page.label, "mod.inject" + kScriptInjection);
  EXPECT_EQ(page.tooltip, "srv.app.mod.inject" + kScriptInjection + " (/srv/app/mod.py:9)_[p]");
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
  const DumpStacks stacks = HostileStacks();
  ASSERT_TRUE(WritePage(stacks, html));
  CHECK_PAGE_OR_SKIP(page, html, FlameGraphNodePath(DeepStack(), 200), "\U0001F525_rtl_\u05e9", "");
  EXPECT_TRUE(page.found);
  EXPECT_EQ(page.label, "mod.recurse");
  EXPECT_EQ(page.samples, 40u);
  EXPECT_NEAR(page.percent, 100.0 * 40 / Total(stacks), 0.0006);
  EXPECT_TRUE(page.zoomed);
  EXPECT_EQ(page.search_matches, 1u);
}

// A box of the page of `stacks`, as chromium shows it.
struct ExpectedBox {
  std::vector<std::string> path;
  std::string search;
  std::string label, tooltip;
  uint64_t samples = 0;
  uint64_t search_matches = 0;
};

void ExpectBox(const DumpStacks& stacks, const ExpectedBox& box) {
  TempDir dir;
  const std::string html = dir.File("page.html");
  ASSERT_TRUE(WritePage(stacks, html));
  CHECK_PAGE_OR_SKIP(page, html, box.path, box.search, "");
  EXPECT_EQ(page.collapsed, PageStacks(stacks));
  EXPECT_TRUE(page.found);
  EXPECT_EQ(page.label, box.label);
  EXPECT_EQ(page.tooltip, box.tooltip);
  EXPECT_EQ(page.samples, box.samples);
  EXPECT_EQ(page.search_matches, box.search_matches);
}

TEST(FlameGraphPage, OneDisplayNameInTwoFilesIsTwoBoxesOfTheirOwnShare) {
  const DumpStacks stacks = SameDisplayNameStacks();
  ExpectBox(stacks, {FlameGraphNodePath(stacks[1].first, 1), "util.Handler.run", "util.Handler.run",
                     "b.lib.util.Handler.run (/b/lib/util.py:5)_[p]", 3, 3});
}

TEST(FlameGraphPage, NativeFramesThatDifferOnlyInAddressAreOneBox) {
  const DumpStacks stacks = NativeAddressStacks();
  // Its samples are the three native stacks'; the search finds it and the
  // kernel's memcpy.
  ExpectBox(stacks, {FlameGraphNodePath(stacks[0].first, 2), "memcpy", "memcpy", "memcpy_[pn]",
                     2 + 3 + 4, 2});
}

TEST(FlameGraphPage, TwentyThousandStacksStayUsable) {
  TempDir dir;
  const std::string html = dir.File("big.html");
  DumpStacks stacks;
  uint64_t thread8 = 0, total = 0;
  for (int i = 0; i < 20000; ++i) {
    TestStack stack = Thread(8 + i % 4, "python3", 7);
    for (int d = 0; d < 20; ++d)
      stack.Python("f" + std::to_string(d * 7 + i % (d + 2)), "/srv/lib.py", d + 1);
    const uint64_t count = 1 + i % 5;
    stacks.push_back({stack, count});
    total += count;
    if (stack.tid == 8) thread8 += count;
  }
  ASSERT_TRUE(WritePage(stacks, html));
  CHECK_PAGE_OR_SKIP(page, html, {"python3-7", "8"}, "lib.f0 (", "");
  EXPECT_EQ(page.collapsed, PageStacks(stacks));
  EXPECT_EQ(page.samples, thread8);
  EXPECT_NEAR(page.percent, 100.0 * thread8 / total, 0.0006);
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
