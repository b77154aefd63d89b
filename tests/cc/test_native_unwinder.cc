// Tests for NativeUnwinder on real processes (no BPF needed): the fixture
// program captures its own registers and stack like PyPerf's BPF program
// does and stays parked, so the test unwinds it live. Checked against
// independent references: nm/addr2line on the same files.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "native_fixtures/native_test_helpers.h"
#include "native_unwinder.h"
#include "support/test_support.h"

namespace ebpf {
namespace {

namespace fs = std::filesystem;

const char* kSpin = "pyperf_fixture::Worker::spin(int)";

using NativeUnwinderTest = pyperf_fixture::NativeFixtureTest;

// The frames the fixture must show, leaf first, for the C library's static
// function printed as `static_name`.
std::vector<std::string> ExpectedFixtureFrames(const std::string& static_name, int depth) {
  std::vector<std::string> names = {"pyperf_capture_here", static_name, "pyperf_fixture_middle"};
  for (int i = 0; i <= depth; ++i) names.push_back(kSpin);
  names.push_back("pyperf_fixture_run");
  names.push_back("main");
  return names;
}

// Default options but for a bound of `depth` frames.
NativeUnwinderOptions DepthBound(size_t depth) {
  NativeUnwinderOptions options;
  options.max_depth = depth;
  return options;
}

std::vector<std::string> Prefix(const std::vector<std::string>& names, size_t n) {
  return std::vector<std::string>(names.begin(), names.begin() + std::min(n, names.size()));
}

TEST_F(NativeUnwinderTest, UnwindsLeafToMainInOrderWithDemangledNames) {
  auto run = Start("debuglink", 2);
  ASSERT_TRUE(run);
  NativeUnwindResult result;
  auto frames = UnwindOnce(run->snapshot.View(), {}, &result);
  auto expected = ExpectedFixtureFrames("fixture_static_step", 2);
  EXPECT_EQ(Prefix(Names(frames), expected.size()), expected) << Join(Names(frames));
  EXPECT_TRUE(result.ok());
  EXPECT_FALSE(result.reached_stop);
  for (const auto& f : frames) EXPECT_FALSE(f.error) << f.name;
  pyperf_fixture::ExpectNoFrameLies(frames, run->snapshot.maps);
}

TEST_F(NativeUnwinderTest, StrippedStaticFunctionIsModulePlusElfAddress) {
  auto run = Start("stripped", 0);
  ASSERT_TRUE(run);
  auto frames = UnwindOnce(run->snapshot.View());
  ASSERT_GE(frames.size(), 4u) << Join(Names(frames));
  std::smatch m;
  ASSERT_TRUE(
      std::regex_match(frames[1].name, m, std::regex(R"(libpyperf_fixture_c\.so\+0x([0-9a-f]+))")))
      << frames[1].name;
  EXPECT_FALSE(frames[1].symbolized);
  uint64_t vaddr = std::stoull(m[1].str(), nullptr, 16);
  EXPECT_EQ(vaddr, frames[1].elf_address);
  // Offline symbolization of that address lands in the right function.
  EXPECT_EQ(pyperf_fixture::Addr2LineFunction(FixtureDir() + "/full/libpyperf_fixture_c.so", vaddr),
            "fixture_static_step");
  auto expected = ExpectedFixtureFrames(frames[1].name, 0);
  EXPECT_EQ(Prefix(Names(frames), expected.size()), expected) << Join(Names(frames));
  pyperf_fixture::ExpectNoFrameLies(frames, run->snapshot.maps);
}

TEST_F(NativeUnwinderTest, MiniDebugInfoNamesStaticFunction) {
  auto run = Start("minidebug", 0);
  ASSERT_TRUE(run);
  auto frames = UnwindOnce(run->snapshot.View());
  auto expected = ExpectedFixtureFrames("fixture_static_step", 0);
  EXPECT_EQ(Prefix(Names(frames), expected.size()), expected) << Join(Names(frames));
}

// Removes what it created under /usr/lib/debug, even when the test fails.
class ScopedDebugFile {
 public:
  ScopedDebugFile(const std::string& from, const std::string& build_id) {
    fs::path dir = fs::path("/usr/lib/debug/.build-id") / build_id.substr(0, 2);
    std::error_code ec;
    for (fs::path p = dir; !fs::exists(p, ec); p = p.parent_path()) created_dirs_.push_back(p);
    fs::create_directories(dir, ec);
    if (ec) return;
    path_ = dir / (build_id.substr(2) + ".debug");
    fs::copy_file(from, path_, fs::copy_options::overwrite_existing, ec);
    ok_ = !ec;
  }
  ~ScopedDebugFile() {
    std::error_code ec;
    if (!path_.empty()) fs::remove(path_, ec);
    for (const auto& d : created_dirs_) fs::remove(d, ec);  // innermost first
  }
  bool ok() const { return ok_; }

 private:
  fs::path path_;
  std::vector<fs::path> created_dirs_;
  bool ok_ = false;
};

TEST_F(NativeUnwinderTest, DebugFileUnderUsrLibDebugByBuildIdNamesStaticFunction) {
  ScopedDebugFile debug(FixtureDir() + "/buildid_host/debug/libpyperf_fixture_c.so.debug",
                        "70797065726603");
  if (!debug.ok()) PYPERF_SKIP_OR_FAIL("cannot write under /usr/lib/debug (needs root)");
  auto run = Start("buildid_host", 0);
  ASSERT_TRUE(run);
  auto frames = UnwindOnce(run->snapshot.View());
  auto expected = ExpectedFixtureFrames("fixture_static_step", 0);
  EXPECT_EQ(Prefix(Names(frames), expected.size()), expected) << Join(Names(frames));
}

TEST_F(NativeUnwinderTest, StopsAfterTheFirstStopSymbol) {
  auto run = Start("debuglink", 3);
  ASSERT_TRUE(run);
  NativeUnwinderOptions options;
  options.stop_symbols = {"pyperf_fixture_middle"};
  NativeUnwindResult result;
  auto frames = UnwindOnce(run->snapshot.View(), options, &result);
  EXPECT_EQ(Names(frames), (std::vector<std::string>{"pyperf_capture_here", "fixture_static_step",
                                                     "pyperf_fixture_middle"}));
  EXPECT_TRUE(result.reached_stop);
  EXPECT_TRUE(result.ok());

  // A C++ stop symbol may be given demangled (or mangled).
  NativeUnwinderOptions cxx;
  cxx.stop_symbols = {kSpin};
  frames = UnwindOnce(run->snapshot.View(), cxx, &result);
  ASSERT_EQ(frames.size(), 4u) << Join(Names(frames));
  EXPECT_EQ(frames.back().name, kSpin);
  EXPECT_TRUE(result.reached_stop);
}

// The frame whose own stack [sp, its caller's sp) holds the snapshot's anchor
// ends the unwind, whether or not its code has a symbol (the stripped C
// library's static function has none): PyPerf's leaf mode ends so at a
// stripped interpreter's eval loop, at its entry shim. Both walks agree: the
// libunwind one that fills the cache, and the cached rule walk after it.
TEST_F(NativeUnwinderTest, StopsAtTheFrameThatHoldsTheAnchorNamedOrNot) {
  for (const char* variant : {"debuglink", "stripped"}) {
    SCOPED_TRACE(variant);
    auto run = Start(variant, 3);
    ASSERT_TRUE(run);
    NativeUnwindResult result;
    const auto whole = UnwindOnce(run->snapshot.View(), {}, &result);
    ASSERT_GE(whole.size(), 4u) << Join(Names(whole));
    // Frame 1 is the C library's static function.
    ASSERT_LT(whole[1].sp, whole[2].sp);
    for (uint64_t anchor :
         {whole[1].sp, whole[1].sp + (whole[2].sp - whole[1].sp) / 2, whole[2].sp - 1}) {
      SCOPED_TRACE("anchor " + pyperf_fixture::Hex(anchor));
      NativeSnapshot snapshot = run->snapshot.View();
      snapshot.stop_frame_anchor = anchor;
      NativeUnwinder unwinder;
      for (const char* walk : {"libunwind", "cached rules"}) {
        SCOPED_TRACE(walk);
        auto frames = Unwind(unwinder, snapshot, &result);
        EXPECT_EQ(Names(frames), Prefix(Names(whole), 2));
        EXPECT_TRUE(result.reached_stop);
        EXPECT_TRUE(result.ok());
      }
      EXPECT_EQ(unwinder.stats().fast_unwinds, 1u);
      unwinder.set_cache_enabled(false);
      auto uncached = Unwind(unwinder, snapshot, &result);
      EXPECT_EQ(Names(uncached), Prefix(Names(whole), 2));
      EXPECT_TRUE(result.reached_stop);
    }
    // Its caller's sp is the caller's own: that frame ends it.
    NativeSnapshot at_caller = run->snapshot.View();
    at_caller.stop_frame_anchor = whole[2].sp;
    EXPECT_EQ(Names(UnwindOnce(at_caller, {}, &result)), Prefix(Names(whole), 3));
    // An anchor below the sampled sp is in no frame: the whole stack.
    NativeSnapshot below = run->snapshot.View();
    below.stop_frame_anchor = whole[0].sp - 8;
    EXPECT_EQ(Names(UnwindOnce(below, {}, &result)), Names(whole));
    EXPECT_FALSE(result.reached_stop);
    // Nor one beyond the stack's outermost frame (whose own stack is
    // open-ended): never the outermost frame, in either walk.
    NativeSnapshot beyond = run->snapshot.View();
    beyond.stop_frame_anchor = whole.back().sp + (uint64_t{1} << 30);
    NativeUnwinder both;
    for (const char* walk : {"libunwind", "cached rules"}) {
      SCOPED_TRACE(walk);
      EXPECT_EQ(Names(Unwind(both, beyond, &result)), Names(whole));
      EXPECT_FALSE(result.reached_stop);
    }
    // Walking past stop symbols (interleaved mode) ignores it.
    NativeUnwinderOptions past;
    past.walk_past_stop_symbols = true;
    EXPECT_EQ(Names(UnwindOnce(at_caller, past, &result)), Names(whole));
  }
}

TEST_F(NativeUnwinderTest, MaxDepthBoundsTheStack) {
  auto run = Start("debuglink", 5);
  ASSERT_TRUE(run);
  NativeUnwindResult result;
  auto frames = UnwindOnce(run->snapshot.View(), DepthBound(3), &result);
  EXPECT_EQ(frames.size(), 3u);
  EXPECT_TRUE(result.truncated);
  EXPECT_FALSE(result.error);
}

TEST_F(NativeUnwinderTest, CachedAndUncachedGiveIdenticalFrames) {
  for (const char* variant : {"debuglink", "stripped", "minidebug", "full"}) {
    SCOPED_TRACE(variant);
    auto run = Start(variant, 2);
    ASSERT_TRUE(run);
    NativeUnwinder unwinder;
    auto cached = Unwind(unwinder, run->snapshot.View());
    auto cached_again = Unwind(unwinder, run->snapshot.View());
    unwinder.set_cache_enabled(false);
    auto uncached = Unwind(unwinder, run->snapshot.View());
    EXPECT_EQ(Names(cached), Names(uncached));
    EXPECT_EQ(Names(cached), Names(cached_again));
    ASSERT_EQ(cached.size(), uncached.size());
    for (size_t i = 0; i < cached.size(); ++i) {
      EXPECT_EQ(cached[i].elf_address, uncached[i].elf_address) << cached[i].name;
      EXPECT_EQ(cached[i].address, uncached[i].address) << cached[i].name;
    }
  }
}

TEST_F(NativeUnwinderTest, InsertDsoNameShowsFullPaths) {
  auto run = Start("stripped", 0);
  ASSERT_TRUE(run);
  NativeUnwinderOptions options;
  options.insert_dso_name = true;
  auto frames = UnwindOnce(run->snapshot.View(), options);
  ASSERT_GE(frames.size(), 3u);
  std::string capture_lib = fs::canonical(FixtureDir() + "/libpyperf_capture.so").string();
  std::string c_lib = fs::canonical(FixtureDir() + "/stripped/libpyperf_fixture_c.so").string();
  EXPECT_EQ(frames[0].name, "pyperf_capture_here (" + capture_lib + ")");
  EXPECT_EQ(frames[1].name.rfind(c_lib + "+0x", 0), 0u) << frames[1].name;
  EXPECT_EQ(frames[2].name, "pyperf_fixture_middle (" + c_lib + ")");
}

TEST_F(NativeUnwinderTest, PythonThroughCtypesStopsAtEvalFrameDefault) {
  const std::string python = "/usr/bin/python3";
  if (!pyperf_test::FileExists(python)) PYPERF_SKIP_OR_FAIL("no " + python);
  std::string error;
  auto run =
      pyperf_fixture::StartCapture(pyperf_fixture::CtypesCaptureCommand(python, 3), {}, &error);
  ASSERT_TRUE(run) << error;
  NativeUnwinderOptions options;
  options.stop_symbols = {"_PyEval_EvalFrameDefault", "PyEval_EvalFrameEx"};
  NativeUnwindResult result;
  auto frames = UnwindOnce(run->snapshot.View(), options, &result);
  ASSERT_FALSE(frames.empty());
  EXPECT_EQ(frames.front().name, "pyperf_capture_here");
  EXPECT_EQ(frames.back().name, "_PyEval_EvalFrameDefault") << Join(Names(frames));
  EXPECT_TRUE(result.reached_stop);
  EXPECT_TRUE(result.ok());
  bool through_libffi = false;
  for (const auto& f : frames) through_libffi |= f.name.find("ffi_call") != std::string::npos;
  EXPECT_TRUE(through_libffi) << Join(Names(frames));
  pyperf_fixture::ExpectNoFrameLies(frames, run->snapshot.maps);
  // Frames in python3.11 that are not named are module+address, never a lie.
  for (const auto& f : frames) {
    if (!f.symbolized) {
      EXPECT_NE(f.name.find("+0x"), std::string::npos) << f.name;
    }
  }
  std::cerr << "python3 frames:\n" << Join(Names(frames));
}

TEST_F(NativeUnwinderTest, ExitedProcessGivesMarkerFrame) {
  auto run = Start("stripped", 0);
  ASSERT_TRUE(run);
  NativeSnapshot snapshot = run->snapshot.View();
  run->Kill();
  NativeUnwinder unwinder;
  NativeUnwindResult result;
  auto frames = Unwind(unwinder, snapshot, &result);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_TRUE(frames[0].error);
  EXPECT_EQ(frames[0].name.rfind("reading process mappings (", 0), 0u) << frames[0].name;
  EXPECT_TRUE(result.error);
  EXPECT_EQ(unwinder.stats().errors, 1u);
}

TEST_F(NativeUnwinderTest, MissingRegistersGiveNoRegistersMarker) {
  NativeSnapshot snapshot;
  snapshot.pid = getpid();
  NativeUnwindResult result;
  auto frames = UnwindOnce(snapshot, {}, &result);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].name, "no registers");
  EXPECT_TRUE(frames[0].error);
  EXPECT_TRUE(result.error);
}

TEST_F(NativeUnwinderTest, GarbageStackNeverCrashesAndStaysBounded) {
  auto run = Start("stripped", 0);
  ASSERT_TRUE(run);
  NativeUnwinder unwinder(DepthBound(64));
  std::mt19937_64 rng(42);
  std::vector<uint8_t> garbage(8192);
  for (int round = 0; round < 200; ++round) {
    for (auto& b : garbage) b = static_cast<uint8_t>(rng());
    NativeSnapshot s = run->snapshot.View();
    s.stack = garbage.data();
    s.stack_len = garbage.size();
    if (round % 2) s.ip = rng();  // an ip in no mapping
    if (round % 3 == 0) s.bp = rng();
    std::vector<NativeFrame> frames;
    unwinder.Unwind(s, &frames);
    EXPECT_LE(frames.size(), 65u);
  }
  // The real snapshot still unwinds correctly afterwards.
  auto frames = Unwind(unwinder, run->snapshot.View());
  pyperf_fixture::ExpectFixtureMiddleAtFrame2(frames);
}

TEST_F(NativeUnwinderTest, RecordedSnapshotReplaysLikeTheLiveProcess) {
  auto run = Start("debuglink", 1);
  ASSERT_TRUE(run);
  NativeUnwinder live;
  auto live_frames = Unwind(live, run->snapshot.View());
  ASSERT_TRUE(pyperf_fixture::MakeSelfContained(run->capture_dir()).ok());
  run->Kill();

  NativeUnwinder replay;
  auto recorded = pyperf_fixture::LoadRecorded(run->capture_dir(), &replay);
  ASSERT_TRUE(recorded.ok()) << recorded.error();
  auto replay_frames = Unwind(replay, recorded->View());
  EXPECT_EQ(Names(replay_frames), Names(live_frames));
  replay.set_cache_enabled(false);
  EXPECT_EQ(Names(Unwind(replay, recorded->View())), Names(live_frames));
}

}  // namespace
}  // namespace ebpf
