// The speedscope encoder (SpeedscopeEncoder.h): files that speedscope's
// published schema accepts, read back by a consumer (tests/js/
// speedscope_file.mjs) into exactly the stacks they were written from (names
// as people read them, escaped as the collapsed text escapes them), hostile
// names included. Real PyPerf runs
// on every interpreter layout:
// Formats.SpeedscopeOfEveryLayoutIsValidAndHoldsTheSameSamples
// (test_e2e_versions.cc).
#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "FrameSpelling.h"
#include "JsonText.h"
#include "ProfileEncoder.h"
#include "SpeedscopeEncoder.h"
#include "support/collapsed.h"
#include "support/encoded_dump.h"
#include "support/speedscope_file.h"
#include "support/test_stack.h"
#include "support/test_support.h"

namespace pyperf_test {
namespace {

constexpr uint64_t kPeriod = 1000000;  // 1 ms
// 2026-12-03T15:00:00Z.
const std::chrono::system_clock::time_point kStart{std::chrono::seconds(1796310000)};

#define REQUIRE_SPEEDSCOPE_READER()                                                   \
  do {                                                                                \
    if (!SpeedscopeReaderAvailable()) PYPERF_SKIP_OR_FAIL("node is not installed");   \
    if (!FileExists(std::string(PYPERF_JS_DIR) + "/node_modules/ajv/package.json") || \
        !FileExists(std::string(PYPERF_JS_DIR) +                                      \
                    "/node_modules/speedscope/dist/release/file-format-schema.json")) \
      PYPERF_SKIP_OR_FAIL("ajv or speedscope missing from " PYPERF_JS_DIR             \
                          "/node_modules "                                            \
                          "(npm ci there)");                                          \
  } while (0)

struct Written {
  std::string path;
  std::string text;
  bool ok = false;
};

// Encodes `stacks` (put in the order ProfileOutput hands them over) to a file.
Written Encode(const TempDir& dir, DumpStacks stacks, uint64_t period = kPeriod) {
  SyntheticDump dump(std::move(stacks), period, kStart);
  Written written;
  written.path = dir.File("profile.speedscope.json");
  written.ok = EncodeDumpToFile(ebpf::pyperf::ProfileFormat::kSpeedscope, dump.profile(), written.path);
  written.text = ReadFile(written.path);
  return written;
}

std::string Describe(const SpeedscopeFileResult& r) {
  std::string text = "error: " + r.error + "\n";
  for (const auto& e : r.schema_errors) text += "schema: " + e + "\n";
  for (const auto& e : r.format_errors) text += "format: " + e + "\n";
  for (const auto& [stack, count] : r.collapsed) text += std::to_string(count) + " " + stack + "\n";
  return text;
}

void ExpectValid(const SpeedscopeFileResult& r) {
  EXPECT_EQ(r.error, "");
  EXPECT_TRUE(r.schema_errors.empty()) << Describe(r);
  EXPECT_TRUE(r.format_errors.empty()) << Describe(r);
}

size_t Occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Every frame kind, every marker, three threads of two processes.
DumpStacks EveryKindStacks() {
  auto main_busy = [] {
    return TestStack("python3", 100, 9)
        .Python("<module>", "/app/calltree.py", 7)
        .Python("main_busy", "/app/calltree.py", 42);
  };
  return {
      {main_busy(), 5},
      {main_busy()
           .Native("PyObject_Call", "/usr/lib/libpython3.11.so", "", 0x1000)
           .Native("libc.so.6+0x1a2b3")
           .Kernel("do_syscall_64")
           .Kernel("ksys_read"),
       3},
      {TestStack("python3", 100, 10)
           .Marker(std::string(ebpf::pyperf::kTruncatedPythonStack))
           .Python("Worker.spin", "/usr/lib/python3.11/threading.py", 1002),
       2},
      {TestStack("python3", 100, 10).Marker(ebpf::pyperf::SampleErrorText(1)), 1},
      {TestStack("python3", 100, 10)
           .Marker(ebpf::pyperf::NativeStackErrorText("no unwind info for 0x7f00"))
           .Native("PyObject_Call", "/usr/lib/libpython3.11.so", "", 0x1000)
           .Native("libc.so.6+0x1a2b3"),
       4},
      {TestStack("worker", 7, 7)
           .Marker(std::string(ebpf::pyperf::kLostSymbol))
           .Marker(std::string(ebpf::pyperf::kMissingPythonFrame))
           .Marker(std::string(ebpf::pyperf::kLostKernelStack))
           .Marker(std::string(ebpf::pyperf::kTruncatedNativeStack))
           .Marker(std::string(ebpf::pyperf::kProcessReplaced)),
       6},
      // No frame at all (PyPerf adds [No Frames]_[pe]; the encoder copes anyway).
      {TestStack("worker", 7, 7), 1},
  };
}

// What the file reads back into (SpeedscopeFileResult::collapsed).
std::map<std::string, uint64_t> AsMap(const DumpStacks& stacks) {
  std::map<std::string, uint64_t> map;
  for (const auto& [stack, count] : stacks)
    map[EscapedStack(stack, PythonNaming::kDisplayName)] += count;
  return map;
}

TEST(SpeedscopeEncoderTest, EveryFrameKindRoundTripsExactlyAndMatchesTheSchema) {
  REQUIRE_SPEEDSCOPE_READER();
  TempDir dir;
  auto stacks = EveryKindStacks();
  Written file = Encode(dir, stacks);
  ASSERT_TRUE(file.ok);
  SpeedscopeFileResult read = ReadSpeedscopeFile(file.path, kPeriod);
  ExpectValid(read);
  EXPECT_EQ(read.collapsed, AsMap(stacks)) << Describe(read);
  // One profile per thread, by pid then tid (numerically: 9 before 10).
  EXPECT_EQ(read.profiles, 3u);
  EXPECT_EQ(read.profile_names,
            (std::vector<std::string>{"worker-7/7", "python3-100/9", "python3-100/10"}));
}

// What the end-to-end tests compare a real run's file with: the collapsed
// dump of the same samples, its Python frames by display name.
TEST(SpeedscopeEncoderTest, ReadsBackAsTheSpeedscopeViewOfTheCollapsedDump) {
  REQUIRE_SPEEDSCOPE_READER();
  TempDir dir;
  // Every stack with a frame (PyPerf writes no line without one).
  DumpStacks stacks;
  for (const auto& entry : EveryKindStacks())
    if (!entry.first.frames.empty()) stacks.push_back(entry);
  Written file = Encode(dir, stacks);
  ASSERT_TRUE(file.ok);
  SyntheticDump dump(stacks, kPeriod, kStart);
  const auto collapsed = StackCounts(EncodeDump(ebpf::pyperf::ProfileFormat::kCollapsed, dump.profile()));
  SpeedscopeFileResult read = ReadSpeedscopeFile(file.path, kPeriod);
  ExpectValid(read);
  EXPECT_EQ(read.collapsed, SpeedscopeViewOfCollapsed(collapsed)) << Describe(read);
}

TEST(SpeedscopeEncoderTest, FramesAreSharedAndNamedAsTheFormatSays) {
  TempDir dir;
  Written file = Encode(dir, EveryKindStacks());
  ASSERT_TRUE(file.ok);
  const std::string& json = file.text;
  EXPECT_EQ(json.rfind("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\"", 0),
            0u)
      << json.substr(0, 200);
  EXPECT_NE(json.find("\"exporter\":\"PyPerf\""), std::string::npos);
  // The interval, in UTC.
  EXPECT_NE(json.find("\"name\":\"PyPerf 2026-12-03T15:00:00.000Z to 2026-12-03T15:01:00.000Z\""),
            std::string::npos)
      << json.substr(0, 300);
  // Python frames by display name, file and line; the others by their text
  // and suffix.
  EXPECT_EQ(Occurrences(json,
                        "{\"name\":\"calltree.main_busy\",\"file\":\"/app/calltree.py\","
                        "\"line\":42}"),
            1u);
  EXPECT_EQ(Occurrences(json,
                        "{\"name\":\"threading.Worker.spin\",\"file\":"
                        "\"/usr/lib/python3.11/threading.py\",\"line\":1002}"),
            1u);
  // Shared: PyObject_Call is in three stacks, listed once.
  EXPECT_EQ(Occurrences(json, "{\"name\":\"PyObject_Call_[pn]\"}"), 1u);
  EXPECT_EQ(Occurrences(json, "{\"name\":\"do_syscall_64_[k]\"}"), 1u);
  EXPECT_EQ(Occurrences(json, "{\"name\":\"[Truncated Python Stack]_[pe]\"}"), 1u);
  EXPECT_EQ(Occurrences(json, "\"type\":\"sampled\""), 3u);
  EXPECT_EQ(Occurrences(json, "\"unit\":\"nanoseconds\""), 3u);
  // Weights are count x period; endValue is the profile's total.
  EXPECT_NE(json.find("\"startValue\":0,\"endValue\":8000000,"), std::string::npos);
  EXPECT_NE(json.find("\"weights\":[5000000,3000000]"), std::string::npos) << json;
  // The busiest thread (python3-100/9: 8 samples, the others 7) is the one
  // speedscope opens.
  EXPECT_NE(json.find("\"activeProfileIndex\":1,"), std::string::npos);
}

TEST(SpeedscopeEncoderTest, HostileNamesStayValidJsonAndRoundTrip) {
  REQUIRE_SPEEDSCOPE_READER();
  TempDir dir;
  const std::string hostile =
      "q\"uo'te \\back\\slash </script><script>alert(1)</script> &amp; \x01\x08\x0b\x0c\x1b\x1f\x7f"
      " \t tab \u2028 ls \u2029 ps \U0001F525 emoji \u05E9\u05DC\u05D5\u05DD rtl \u202E over";
  DumpStacks stacks = {
      {TestStack("py" + hostile, 1, 2)
           .Python("C" + hostile + ".f" + hostile, "/srv/" + hostile + "/mod.py", 3)
           .Native("n" + hostile, "/lib/" + hostile + ".so", "", 0x10)
           .Kernel("k" + hostile)
           .Marker("[" + hostile + "]")
           .Marker(ebpf::pyperf::NativeStackErrorText(hostile)),
       3},
      // A file in angle brackets: its module is the file's name.
      {TestStack("python3", 1, 3).Python("<module>", "<string>", 1), 1},
      // Characters the collapsed text turns into '_' (';', U+2028, U+2029,
      // VT, FS, NEL): speedscope shows them as '_' too.
      {TestStack("raw\u2028comm", 1, 4).Native("n;\u2028\u2029\x0b\x1c\u0085").Kernel("k\u2028"),
       1},
  };
  Written file = Encode(dir, stacks);
  ASSERT_TRUE(file.ok);
  // No raw control character but the encoder's own line breaks, no raw
  // U+2028/2029 (line ends in old JavaScript), no markup.
  for (char c : file.text) {
    unsigned char u = static_cast<unsigned char>(c);
    EXPECT_TRUE(u >= 0x20 || c == '\n') << "raw byte " << int(u);
    if (u < 0x20 && c != '\n') break;
  }
  EXPECT_EQ(file.text.find("\u2028"), std::string::npos);
  EXPECT_EQ(file.text.find("\u2029"), std::string::npos);
  EXPECT_EQ(file.text.find("</script>"), std::string::npos);
  EXPECT_EQ(file.text.find('<'), std::string::npos);
  SpeedscopeFileResult read = ReadSpeedscopeFile(file.path, kPeriod);
  ExpectValid(read);
  EXPECT_EQ(read.collapsed, AsMap(stacks)) << Describe(read);
  // The escaped stack, written out by hand: one '_' per separator or break.
  EXPECT_EQ(read.collapsed["raw_comm-1/4;n_______[pn];k__[k]"], 1u) << Describe(read);
}

TEST(SpeedscopeEncoderTest, BytesThatAreNotUtf8BecomeReplacementCharacters) {
  REQUIRE_SPEEDSCOPE_READER();
  TempDir dir;
  // A stray continuation byte, 0xff, a truncated 3-byte sequence, an encoded
  // surrogate and an overlong '/': each byte one U+FFFD.
  const std::string bad =
      "a\x80"
      "b\xff"
      "c\xe2\x82"
      "d\xed\xa0\x80"
      "e\xc0\xaf";
  const std::string fixed =
      "a\uFFFD"
      "b\uFFFD"
      "c\uFFFD\uFFFD"
      "d\uFFFD\uFFFD\uFFFD"
      "e\uFFFD\uFFFD";
  Written file = Encode(dir, {{TestStack("python3", 1, 1).Native(bad), 2}});
  ASSERT_TRUE(file.ok);
  SpeedscopeFileResult read = ReadSpeedscopeFile(file.path, kPeriod);
  ExpectValid(read);  // includes: the file is strict UTF-8
  EXPECT_EQ(read.collapsed,
            (std::map<std::string, uint64_t>{{"python3-1/1;" + fixed + "_[pn]", 2}}))
      << Describe(read);
}

TEST(SpeedscopeEncoderTest, PythonFramesAreNamedAsPeopleKnowThem) {
  TempDir dir;
  const std::string file = "/srv/bcc-pyperf/examples/cpp/pyperf/demo/demo_workload.py";
  Written written =
      Encode(dir, {{TestStack("python3", 1, 1).Python("RequestHandler.handle", file, 14), 2}});
  ASSERT_TRUE(written.ok);
  EXPECT_EQ(
      Occurrences(written.text, "{\"name\":\"demo_workload.RequestHandler.handle\",\"file\":\"" +
                                    file + "\",\"line\":14}"),
      1u)
      << written.text;
}

TEST(SpeedscopeEncoderTest, FramesOfOneDisplayNameInTwoFilesOrLinesAreSeparateFrames) {
  REQUIRE_SPEEDSCOPE_READER();
  TempDir dir;
  const DumpStacks stacks = {
      {TestStack("python3", 1, 1).Python("Handler.run", "/a/app/util.py", 5), 2},
      {TestStack("python3", 1, 1).Python("Handler.run", "/b/lib/util.py", 5), 3},
      {TestStack("python3", 1, 1).Python("Handler.run", "/b/lib/util.py", 6), 4}};
  Written file = Encode(dir, stacks);
  ASSERT_TRUE(file.ok);
  EXPECT_EQ(Occurrences(file.text, "{\"name\":\"util.Handler.run\""), 3u) << file.text;
  SpeedscopeFileResult read = ReadSpeedscopeFile(file.path, kPeriod);
  ExpectValid(read);
  EXPECT_EQ(read.collapsed, AsMap(stacks)) << Describe(read);
  EXPECT_EQ(read.collapsed.size(), 3u);
}

TEST(SpeedscopeEncoderTest, NativeFramesThatDifferOnlyInAddressAreOneFrameAndOneSample) {
  REQUIRE_SPEEDSCOPE_READER();
  TempDir dir;
  auto main = [] { return TestStack("python3", 1, 1).Python("main", "/app/mod.py", 3); };
  const DumpStacks stacks = {{main().Native("memcpy", "/lib/libc.so.6", "ab12", 0x100), 2},
                             {main().Native("memcpy", "/lib/libc.so.6", "ab12", 0x200), 3},
                             {main().Native("memcpy", "/lib/other.so", "", 0x300), 4},
                             {main().Kernel("memcpy"), 1}};
  Written file = Encode(dir, stacks);
  ASSERT_TRUE(file.ok);
  EXPECT_EQ(Occurrences(file.text, "{\"name\":\"memcpy_[pn]\"}"), 1u) << file.text;
  EXPECT_EQ(Occurrences(file.text, "{\"name\":\"memcpy_[k]\"}"), 1u) << file.text;
  // Frames main, the kernel's memcpy, the native one; the three native
  // samples one, as they are one collapsed line.
  EXPECT_NE(file.text.find("\"samples\":[\n[0,1],\n[0,2]],\"weights\":[1000000,9000000]"),
            std::string::npos)
      << file.text;
  SpeedscopeFileResult read = ReadSpeedscopeFile(file.path, kPeriod);
  ExpectValid(read);
  EXPECT_EQ(read.collapsed, AsMap(stacks)) << Describe(read);
}

// A dump of the size PyPerf writes (tens of thousands of stacks): every
// frame listed once, every stack back exactly.
TEST(SpeedscopeEncoderTest, ALargeDumpRoundTripsWithFramesListedOnce) {
  REQUIRE_SPEEDSCOPE_READER();
  TempDir dir;
  std::vector<TestFrame> pool;
  for (int i = 0; i < 300; ++i) {
    TestStack one("python3", 1, 1);
    const std::string n = std::to_string(i);
    if (i % 3 == 0) {
      one.Python((i % 2 ? "Cls.fn" : "fn") + n, "/app/mod" + std::to_string(i % 7) + ".py", i);
    } else if (i % 3 == 1) {
      one.Native("native" + n, "/lib/lib" + std::to_string(i % 5) + ".so", "", 0x1000 + i);
    } else {
      one.Kernel("kernel" + n);
    }
    pool.push_back(one.frames[0]);
  }
  DumpStacks stacks;
  uint64_t seed = 12345;
  auto next = [&] { return (seed = seed * 6364136223846793005ull + 1442695040888963407ull) >> 33; };
  for (int i = 0; i < 20000; ++i) {
    TestStack stack("python3", 100 + i % 8 / 3, 200 + i % 8);
    for (int depth = 0; depth < 24; ++depth) stack.frames.push_back(pool[next() % pool.size()]);
    stacks.push_back({stack, 1 + next() % 50});
  }
  Written file = Encode(dir, stacks);
  ASSERT_TRUE(file.ok);
  EXPECT_EQ(Occurrences(file.text, "{\"name\":"), pool.size());
  SpeedscopeFileResult read = ReadSpeedscopeFile(file.path, kPeriod);
  ExpectValid(read);
  EXPECT_EQ(read.profiles, 8u);  // 8 threads of 3 processes
  EXPECT_TRUE(read.collapsed == AsMap(stacks)) << "the round trip differs";
}

TEST(SpeedscopeEncoderTest, AnEmptyDumpHasOneEmptyProfile) {
  REQUIRE_SPEEDSCOPE_READER();
  TempDir dir;
  Written file = Encode(dir, {});
  ASSERT_TRUE(file.ok);
  SpeedscopeFileResult read = ReadSpeedscopeFile(file.path, kPeriod);
  ExpectValid(read);
  EXPECT_EQ(read.profile_names, (std::vector<std::string>{"[No Samples]"}));
  EXPECT_TRUE(read.collapsed.empty()) << Describe(read);
}

TEST(SpeedscopeEncoderTest, WithoutAPeriodWeightsAreCounts) {
  REQUIRE_SPEEDSCOPE_READER();
  TempDir dir;
  auto stacks = EveryKindStacks();
  Written file = Encode(dir, stacks, /*period=*/0);
  ASSERT_TRUE(file.ok);
  EXPECT_EQ(Occurrences(file.text, "\"unit\":\"none\""), 3u);
  SpeedscopeFileResult read = ReadSpeedscopeFile(file.path, 0);
  ExpectValid(read);
  EXPECT_EQ(read.collapsed, AsMap(stacks)) << Describe(read);
}

// The reader is a real check: files broken in ways that matter are reported.
TEST(SpeedscopeEncoderTest, TheReaderRejectsBrokenFiles) {
  REQUIRE_SPEEDSCOPE_READER();
  TempDir dir;
  Written file = Encode(dir, EveryKindStacks());
  ASSERT_TRUE(file.ok);
  ASSERT_TRUE(ReadSpeedscopeFile(file.path, kPeriod).schema_errors.empty());

  auto replace_first = [&](const std::string& from, const std::string& to) {
    std::string text = file.text;
    size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) text.replace(at, from.size(), to);
    return text;
  };
  auto read_text = [&](const std::string& text) {
    std::string path = dir.File("broken.speedscope.json");
    std::FILE* out = std::fopen(path.c_str(), "w");
    EXPECT_NE(out, nullptr);
    if (out) std::fwrite(text.data(), 1, text.size(), out), std::fclose(out);
    return ReadSpeedscopeFile(path, kPeriod);
  };

  // Against the schema.
  struct Case {
    std::string what, from, to;
  };
  std::vector<Case> schema_cases = {
      {"weights missing", ",\"weights\":[5000000,3000000]", ""},
      {"a weight not a number", "\"weights\":[5000000,", "\"weights\":[\"5000000\","},
      {"no $schema", "\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",", ""},
      {"unknown unit", "\"unit\":\"nanoseconds\"", "\"unit\":\"ns\""},
      {"frame without name", "{\"name\":\"PyObject_Call_[pn]\"}", "{}"},
  };
  for (const Case& c : schema_cases) {
    SpeedscopeFileResult read = read_text(replace_first(c.from, c.to));
    EXPECT_EQ(read.error, "") << c.what;
    EXPECT_FALSE(read.schema_errors.empty()) << c.what << " not reported\n" << Describe(read);
  }
  SpeedscopeFileResult not_json = read_text(file.text.substr(0, file.text.size() / 2));
  EXPECT_FALSE(not_json.schema_errors.empty()) << "a cut file not reported";

  // Beyond the schema, what speedscope's importer needs.
  std::vector<Case> format_cases = {
      {"fewer weights than samples", "\"weights\":[5000000,3000000]", "\"weights\":[5000000]"},
      {"endValue not the total", "\"endValue\":8000000,", "\"endValue\":9000000,"},
      {"weight not a multiple of the period", "\"weights\":[5000000,", "\"weights\":[5000001,"},
      // worker-7/7's first sample is its frameless one.
      {"frame index out of range", "\"samples\":[\n[]", "\"samples\":[\n[99999]"},
      {"not UTF-8", "PyObject_Call",
       "PyObject\xff"
       "Call"},
  };
  for (const Case& c : format_cases) {
    SpeedscopeFileResult read = read_text(replace_first(c.from, c.to));
    EXPECT_EQ(read.error, "") << c.what;
    EXPECT_FALSE(read.format_errors.empty()) << c.what << " not reported\n" << Describe(read);
  }

  // A file that is not there is an error, not a verdict.
  EXPECT_NE(ReadSpeedscopeFile(dir.File("missing.json"), kPeriod).error, "");
}

TEST(SpeedscopeEncoderTest, WriteErrorsAreReported) {
  std::FILE* full = std::fopen("/dev/full", "w");
  if (!full) GTEST_SKIP() << "no /dev/full";
  std::setvbuf(full, nullptr, _IONBF, 0);
  SyntheticDump dump(EveryKindStacks(), kPeriod, /*start=*/{}, /*length=*/{});
  errno = 0;
  EXPECT_FALSE(ebpf::pyperf::MakeSpeedscopeEncoder()->Write(dump.profile(), full));
  EXPECT_EQ(errno, ENOSPC);
  std::fclose(full);
}

TEST(SpeedscopeEncoderTest, JsonStringsEscapeWhatJsonAndScriptsNeed) {
  std::string out;
  ebpf::pyperf::AppendJsonString("a\"b\\c\n\r\t\x01\x7f<>&\u2028\u2029\u00e9\U0001F525\xff", &out);
  EXPECT_EQ(out,
            "\"a\\\"b\\\\c\\n\\r\\t\\u0001\\u007f\\u003c\\u003e\\u0026\\u2028\\u2029\u00e9"
            "\U0001F525\\ufffd\"");
}

// speedscope itself (not just its schema) opens the file, hostile names and
// all, on the busiest thread.
TEST(SpeedscopeEncoderTest, HostileFileOpensInSpeedscopeItself) {
  REQUIRE_SPEEDSCOPE_READER();
  if (!SpeedscopeAppAvailable())
    PYPERF_SKIP_OR_FAIL("/usr/bin/chromium or playwright-core is not installed");
  TempDir dir;
  const std::string hostile =
      "\"q\\ </script><img src=x onerror=alert(1)> &amp; \x01\x1f\x7f \U0001F525 \u05E9\u05DC "
      "\u202E";
  auto stacks = EveryKindStacks();
  stacks.push_back({TestStack("busy" + hostile, 3, 3)
                        .Python("C" + hostile + ".f" + hostile, "/srv/" + hostile + "/m.py", 3)
                        .Native("n" + hostile)
                        .Kernel("k" + hostile),
                    50});
  Written file = Encode(dir, stacks);
  ASSERT_TRUE(file.ok);
  SpeedscopeAppResult app = LoadInSpeedscopeApp(file.path);
  ASSERT_EQ(app.error, "");
  std::string problems;
  for (const std::string& p : app.problems) problems += p + "\n";
  EXPECT_TRUE(app.problems.empty()) << problems;
  EXPECT_EQ(app.title, "PyPerf 2026-12-03T15:00:00.000Z to 2026-12-03T15:01:00.000Z - speedscope");
  // Profiles by pid: the hostile thread (pid 3, the busiest) first of four.
  EXPECT_EQ(app.profile, Collapsed(TestStack("busy" + hostile, 3, 3)) + " (1/4)");

  // And the loader does see speedscope fail: python3-100/9 one weight short.
  std::string broken = file.text;
  const std::string weights = "\"weights\":[5000000,3000000]";
  size_t at = broken.find(weights);
  ASSERT_NE(at, std::string::npos);
  broken.replace(at, weights.size(), "\"weights\":[5000000]");
  std::string broken_path = dir.File("broken.speedscope.json");
  std::FILE* out = std::fopen(broken_path.c_str(), "w");
  ASSERT_NE(out, nullptr);
  std::fwrite(broken.data(), 1, broken.size(), out);
  std::fclose(out);
  SpeedscopeAppResult failed = LoadInSpeedscopeApp(broken_path);
  EXPECT_EQ(failed.error, "");
  EXPECT_FALSE(failed.problems.empty())
      << "a file speedscope cannot import loaded without a problem";

  SpeedscopeAppResult not_a_profile = LoadInSpeedscopeApp(dir.File("missing.json"));
  EXPECT_NE(not_a_profile.error, "");
}

// A real PyPerf run: its speedscope file says what its collapsed file of the
// same dump says.
}  // namespace
}  // namespace pyperf_test
