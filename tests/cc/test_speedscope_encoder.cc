// The speedscope encoder (SpeedscopeEncoder.h): files that speedscope's
// published schema accepts, read back by a consumer (tests/js/
// speedscope_file.mjs) into exactly the collapsed stacks they were written
// from, hostile names included. Real PyPerf runs on every interpreter layout:
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
#include "ProfileEncoder.h"
#include "PythonFrameFormat.h"
#include "SpeedscopeEncoder.h"
#include "support/encoded_dump.h"
#include "support/speedscope_file.h"
#include "support/test_support.h"

namespace pyperf_test {
namespace {

using pyperf::FrameKind;

constexpr uint64_t kPeriod = 1000000;  // 1 ms
// 2026-12-03T15:00:00Z.
const std::chrono::system_clock::time_point kStart{std::chrono::seconds(1796310000)};
const std::string kUnparseableLine =
    std::string(pyperf::kUnparseableStacksProfile) + ";" +
    pyperf::SpellFrame(pyperf::FrameKind::kMarker, pyperf::kUnparseableStack);

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

// A stack as PyPerf builds it: head token, then frames (already spelled).
std::string Stack(const std::string& comm, uint32_t pid, uint32_t tid,
                  const std::vector<std::string>& spelled_frames) {
  pyperf::StackText text;
  text.Start(comm.data(), comm.size(), pid, tid);
  for (const std::string& frame : spelled_frames) text.AddSpelled(frame);
  return text.text();
}

std::string Py(const std::string& file, const std::string& function, const std::string& cls,
               int line) {
  return pyperf::FormatPythonFrame(file, function, cls, line);
}

struct Written {
  std::string path;
  std::string text;
  bool ok = false;
};

// Encodes `stacks` (sorted, as ProfileOutput hands them over) to a file.
Written Encode(const TempDir& dir, std::vector<std::pair<std::string, uint64_t>> stacks,
               uint64_t period = kPeriod) {
  SyntheticDump dump(std::move(stacks), period, kStart);
  Written written;
  written.path = dir.File("profile.speedscope.json");
  written.ok = EncodeDumpToFile(pyperf::ProfileFormat::kSpeedscope, dump.profile(), written.path);
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
std::vector<std::pair<std::string, uint64_t>> EveryKindStacks() {
  const std::string main_busy = Py("/app/calltree.py", "main_busy", "", 42);
  const std::string module = Py("/app/calltree.py", "<module>", "", 7);
  const std::string spin = Py("/usr/lib/python3.11/threading.py", "spin", "Worker", 1002);
  const std::string call = pyperf::SpellFrame(FrameKind::kNative, "PyObject_Call");
  const std::string libc = pyperf::SpellFrame(FrameKind::kNative, "libc.so.6+0x1a2b3");
  const std::string syscall = pyperf::SpellFrame(FrameKind::kKernel, "do_syscall_64");
  const std::string read = pyperf::SpellFrame(FrameKind::kKernel, "ksys_read");
  return {
      {Stack("python3", 100, 9, {module, main_busy}), 5},
      {Stack("python3", 100, 9, {module, main_busy, call, libc, syscall, read}), 3},
      {Stack("python3", 100, 10,
             {pyperf::SpellFrame(FrameKind::kMarker, pyperf::kTruncatedPythonStack), spin}),
       2},
      {Stack("python3", 100, 10, {pyperf::SampleErrorFrame(1)}), 1},
      {Stack("python3", 100, 10,
             {pyperf::NativeStackErrorFrame("no unwind info for 0x7f00"), call, libc}),
       4},
      {Stack("worker", 7, 7,
             {pyperf::SpellFrame(FrameKind::kMarker, pyperf::kLostSymbol),
              pyperf::SpellFrame(FrameKind::kMarker, pyperf::kMissingPythonFrame),
              pyperf::SpellFrame(FrameKind::kMarker, pyperf::kLostKernelStack),
              pyperf::SpellFrame(FrameKind::kMarker, pyperf::kTruncatedNativeStack),
              pyperf::SpellFrame(FrameKind::kMarker, pyperf::kProcessReplaced)}),
       6},
      // No frame at all (PyPerf adds [No Frames]_[pe]; the encoder copes anyway).
      {Stack("worker", 7, 7, {}), 1},
  };
}

std::map<std::string, uint64_t> AsMap(const std::vector<std::pair<std::string, uint64_t>>& v) {
  std::map<std::string, uint64_t> map;
  for (const auto& [stack, count] : v) map[stack] += count;
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
  // Python frames by name, file and line; the others by their whole spelling.
  EXPECT_EQ(Occurrences(json,
                        "{\"name\":\"app.calltree.main_busy\",\"file\":\"/app/calltree.py\","
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
  std::vector<std::pair<std::string, uint64_t>> stacks = {
      {Stack("py" + hostile, 1, 2,
             {Py("/srv/" + hostile + "/mod.py", "f" + hostile, "C" + hostile, 3),
              pyperf::SpellFrame(FrameKind::kNative, "n" + hostile),
              pyperf::SpellFrame(FrameKind::kKernel, "k" + hostile),
              pyperf::SpellFrame(FrameKind::kMarker, "[" + hostile + "]"),
              pyperf::NativeStackErrorFrame(hostile)}),
       3},
      // A Python frame whose parts do not spell it back (line "007"), and one
      // that is not "<name> (<file>:<line>)" at all: kept by their spelling.
      {Stack("python3", 1, 3, {"mod.f (mod.py:007)_[p]", "just text_[p]", " (:)_[p]"}), 2},
      // Empty module: a file in angle brackets.
      {Stack("python3", 1, 3, {Py("<string>", "<module>", "", 1)}), 1},
      // Characters FrameSpelling turns into '_' (U+2028, U+2029, VT, FS) as
      // another caller could hand them over: still valid, still exact.
      {"raw\u2028comm-1/4;n\u2028\u2029\x0b\x1c\u0085_[pn];k\u2028_[k]", 1},
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
  std::string raw_stack = "python3-1/1;" + bad + "_[pn]";
  Written file = Encode(dir, {{raw_stack, 2}});
  ASSERT_TRUE(file.ok);
  SpeedscopeFileResult read = ReadSpeedscopeFile(file.path, kPeriod);
  ExpectValid(read);  // includes: the file is strict UTF-8
  EXPECT_EQ(read.collapsed,
            (std::map<std::string, uint64_t>{{"python3-1/1;" + fixed + "_[pn]", 2}}))
      << Describe(read);
}

TEST(SpeedscopeEncoderTest, UnparseableStacksAreCountedInAMarkedProfile) {
  REQUIRE_SPEEDSCOPE_READER();
  TempDir dir;
  auto stacks = EveryKindStacks();
  std::vector<std::pair<std::string, uint64_t>> bad = {
      {"no head token;main_[p]", 4},            // no "<comm>-<pid>/<tid>"
      {"python3-1/2;frame_without_suffix", 5},  // a frame of no known kind
      {"python3-x/2;f_[p]", 6},                 // not a pid
  };
  auto all = stacks;
  all.insert(all.end(), bad.begin(), bad.end());
  Written file = Encode(dir, all);
  ASSERT_TRUE(file.ok);
  SpeedscopeFileResult read = ReadSpeedscopeFile(file.path, kPeriod);
  ExpectValid(read);
  auto expected = AsMap(stacks);
  expected[kUnparseableLine] = 4 + 5 + 6;  // every sample still accounted
  EXPECT_EQ(read.collapsed, expected) << Describe(read);
  ASSERT_FALSE(read.profile_names.empty());
  EXPECT_EQ(read.profile_names.back(), pyperf::kUnparseableStacksProfile);
}

// A dump of the size PyPerf writes (tens of thousands of stacks): every
// frame listed once, every stack back exactly.
TEST(SpeedscopeEncoderTest, ALargeDumpRoundTripsWithFramesListedOnce) {
  REQUIRE_SPEEDSCOPE_READER();
  TempDir dir;
  std::vector<std::string> pool;
  for (int i = 0; i < 300; ++i)
    pool.push_back(i % 3 == 0 ? Py("/app/mod" + std::to_string(i % 7) + ".py",
                                   "fn" + std::to_string(i), i % 2 ? "Cls" : "", i)
                   : i % 3 == 1
                       ? pyperf::SpellFrame(FrameKind::kNative, "native" + std::to_string(i))
                       : pyperf::SpellFrame(FrameKind::kKernel, "kernel" + std::to_string(i)));
  std::vector<std::pair<std::string, uint64_t>> stacks;
  uint64_t seed = 12345;
  auto next = [&] { return (seed = seed * 6364136223846793005ull + 1442695040888963407ull) >> 33; };
  for (int i = 0; i < 20000; ++i) {
    std::vector<std::string> frames;
    for (int depth = 0; depth < 24; ++depth) frames.push_back(pool[next() % pool.size()]);
    stacks.push_back({Stack("python3", 100 + i % 8 / 3, 200 + i % 8, frames), 1 + next() % 50});
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
  EXPECT_FALSE(pyperf::MakeSpeedscopeEncoder()->Write(dump.profile(), full));
  EXPECT_EQ(errno, ENOSPC);
  std::fclose(full);
}

TEST(SpeedscopeEncoderTest, JsonStringsEscapeWhatJsonAndScriptsNeed) {
  std::string out;
  pyperf::AppendSpeedscopeJsonString("a\"b\\c\n\r\t\x01\x7f<>&\u2028\u2029\u00e9\U0001F525\xff",
                                     &out);
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
  stacks.push_back({Stack("busy" + hostile, 3, 3,
                          {Py("/srv/" + hostile + "/m.py", "f" + hostile, "C" + hostile, 3),
                           pyperf::SpellFrame(FrameKind::kNative, "n" + hostile),
                           pyperf::SpellFrame(FrameKind::kKernel, "k" + hostile)}),
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
  EXPECT_EQ(app.profile, Stack("busy" + hostile, 3, 3, {}) + " (1/4)");

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
