// Tests for the unwinder's fast path (cached_rule_walk.h): once a stack has
// been unwound by libunwind, unwinding it again takes the fast path (counted
// in NativeUnwinderStats::fast_unwinds) and gives exactly libunwind's frames,
// on the recorded benchmark snapshots and on live fixture processes, with and
// without stop symbols (ending the walk, or marked and walked past) and depth
// limits, and ending where a stack copy that may not be read beyond ends.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "native_fixtures/native_snapshot_files.h"
#include "native_fixtures/native_test_helpers.h"
#include "native_unwinder.h"
#include "support/test_support.h"

namespace ebpf {
namespace {

using CachedRuleWalkTest = pyperf_fixture::NativeFixtureTest;

void ExpectSameFrames(const std::vector<NativeFrame>& fast, const std::vector<NativeFrame>& slow) {
  ASSERT_EQ(Names(fast), Names(slow)) << "fast:\n"
                                      << Join(Names(fast)) << "libunwind:\n"
                                      << Join(Names(slow));
  for (size_t i = 0; i < fast.size(); ++i) {
    SCOPED_TRACE(slow[i].name);
    EXPECT_EQ(fast[i].address, slow[i].address);
    EXPECT_EQ(fast[i].elf_address, slow[i].elf_address);
    EXPECT_EQ(fast[i].symbolized, slow[i].symbolized);
    EXPECT_EQ(fast[i].error, slow[i].error);
    EXPECT_TRUE(fast[i].file == slow[i].file);
    EXPECT_EQ(fast[i].sp, slow[i].sp);
    EXPECT_EQ(fast[i].stop_symbol, slow[i].stop_symbol);
  }
}

struct Variation {
  const char* label;
  std::vector<std::string> stop_symbols;
  size_t max_depth;
  bool walk_past_stop_symbols = false;
};

std::vector<Variation> Variations() {
  return {
      {"to the outermost frame", {}, 128},
      {"stop at the eval loop", {"_PyEval_EvalFrameDefault", "PyEval_EvalFrameEx"}, 128},
      {"stop in the middle", {"pyperf_fixture_middle"}, 128},
      {"mark the middle and walk past it", {"pyperf_fixture_middle"}, 128, true},
      {"max depth 3", {}, 3},
  };
}

// Unwinds `snapshot` with libunwind (empty cache), then again: the second must
// take the fast path and match the first and the uncached unwinder.
void ExpectFastPathMatchesLibunwind(const NativeSnapshot& snapshot,
                                    const std::function<void(NativeUnwinder*)>& add_process) {
  for (const Variation& v : Variations()) {
    SCOPED_TRACE(v.label);
    NativeUnwinderOptions options;
    options.stop_symbols = v.stop_symbols;
    options.max_depth = v.max_depth;
    options.walk_past_stop_symbols = v.walk_past_stop_symbols;
    NativeUnwinder unwinder(options);
    add_process(&unwinder);
    std::vector<NativeFrame> slow, fast, uncached;
    NativeUnwindResult slow_result = unwinder.Unwind(snapshot, &slow);
    ASSERT_EQ(unwinder.stats().fast_unwinds, 0u);
    NativeUnwindResult fast_result = unwinder.Unwind(snapshot, &fast);
    EXPECT_EQ(unwinder.stats().fast_unwinds, 1u) << "second unwind did not take the fast path:\n"
                                                 << Join(Names(fast));
    ExpectSameFrames(fast, slow);
    EXPECT_EQ(fast_result.error, slow_result.error);
    EXPECT_EQ(fast_result.reached_stop, slow_result.reached_stop);
    EXPECT_EQ(fast_result.truncated, slow_result.truncated);
    EXPECT_GE(slow.size(), 3u) << Join(Names(slow));

    NativeUnwinder scratch(options);
    add_process(&scratch);
    scratch.set_cache_enabled(false);
    scratch.Unwind(snapshot, &uncached);
    EXPECT_EQ(Names(fast), Names(uncached));
    EXPECT_EQ(scratch.stats().fast_unwinds, 0u);
  }
}

TEST(CachedRuleWalkSnapshotTest, RecordedSnapshotsTakeTheFastPathWithLibunwindsFrames) {
  const std::string dir = pyperf_fixture::SnapshotDir();
  for (const char* name : {"cxx_debuglink", "cxx_stripped", "python3_ctypes"}) {
    SCOPED_TRACE(name);
    NativeUnwinder probe;
    auto recorded = pyperf_fixture::LoadRecorded(dir + "/" + name, &probe);
    if (!recorded.ok()) {
      PYPERF_SKIP_OR_FAIL("no recorded snapshot " + std::string(name) + ": " + recorded.error() +
                          " (cmake --build build --target native_snapshots)");
    }
    const std::string path = dir + "/" + name;
    ExpectFastPathMatchesLibunwind(recorded->View(), [&](NativeUnwinder* u) {
      ASSERT_TRUE(pyperf_fixture::LoadRecorded(path, u).ok());
    });
  }
}

TEST_F(CachedRuleWalkTest, LiveFixturesTakeTheFastPathWithLibunwindsFrames) {
  for (const char* variant : {"debuglink", "stripped", "minidebug", "full"}) {
    SCOPED_TRACE(variant);
    auto run = Start(variant, 3);
    ASSERT_TRUE(run);
    ExpectFastPathMatchesLibunwind(run->snapshot.View(), [](NativeUnwinder*) {});
  }
}

TEST_F(CachedRuleWalkTest, StackCopyTooShortFallsBackToLibunwind) {
  auto run = Start("full", 2);
  ASSERT_TRUE(run);
  NativeSnapshot full = run->snapshot.View();
  NativeUnwinder unwinder;
  std::vector<NativeFrame> warm, frames;
  unwinder.Unwind(full, &warm);
  // Only the leaf's frame and a little more: the fast path cannot read far
  // enough and must leave the sample to libunwind, which reads the rest of
  // the stack from the live process.
  NativeSnapshot cut = full;
  cut.stack_len = 16;
  unwinder.Unwind(cut, &frames);
  NativeUnwinderStats stats = unwinder.stats();
  EXPECT_EQ(stats.fast_unwinds, 0u);
  EXPECT_EQ(stats.fast_unwinds_abandoned, 2u);
  EXPECT_EQ(Names(frames), Names(warm));
}

// With stack_copy_only, a copy cut short ends the unwind where it ends
// (copy_ended), on libunwind's path and on the fast path alike, and nothing is
// read from the live process; a copy that is not cut (the stack's whole) and
// ends before the outermost frame is an unwind error instead.
TEST_F(CachedRuleWalkTest, ACopyOnlyUnwindEndsWhereTheCutCopyEndsOnBothPaths) {
  auto run = Start("full", 3);
  ASSERT_TRUE(run);
  NativeSnapshot full = run->snapshot.View();
  std::vector<NativeFrame> whole, slow, fast, uncut;
  NativeUnwinder reference;
  reference.Unwind(full, &whole);
  ASSERT_GE(whole.size(), 4u) << Join(Names(whole));
  // The copy holds the leaf's frame and its caller's return address, not
  // the whole stack.
  NativeSnapshot cut = full;
  cut.stack_len = static_cast<size_t>(whole[2].sp - full.sp);
  cut.stack_cut = true;
  NativeUnwinderOptions options;
  options.stack_copy_only = true;
  NativeUnwinder unwinder(options);
  NativeUnwindResult slow_result = unwinder.Unwind(cut, &slow);
  NativeUnwindResult fast_result = unwinder.Unwind(cut, &fast);
  NativeUnwinderStats stats = unwinder.stats();
  EXPECT_EQ(stats.fast_unwinds, 1u);
  EXPECT_EQ(stats.remote_reads, 0u);
  EXPECT_TRUE(slow_result.copy_ended);
  EXPECT_FALSE(slow_result.error) << Join(Names(slow));
  EXPECT_TRUE(fast_result.copy_ended);
  EXPECT_FALSE(fast_result.error);
  ExpectSameFrames(fast, slow);
  ASSERT_GE(slow.size(), 2u);
  ASSERT_LT(slow.size(), whole.size());
  for (size_t i = 0; i < slow.size(); ++i) EXPECT_EQ(slow[i].name, whole[i].name);

  cut.stack_cut = false;
  NativeUnwindResult uncut_result = unwinder.Unwind(cut, &uncut);
  EXPECT_FALSE(uncut_result.copy_ended);
  EXPECT_TRUE(uncut_result.error) << Join(Names(uncut));
  EXPECT_EQ(unwinder.stats().remote_reads, 0u);
}

}  // namespace
}  // namespace ebpf
