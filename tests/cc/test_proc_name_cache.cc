// Tests for the symbolization caches: names keyed by file and offset (shared
// between processes, never stale across pid reuse or exec), their bounds
// under floods of addresses, age eviction, and the module cache.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "native_fixtures/native_test_helpers.h"
#include "native_unwinder.h"
#include "proc_name_cache.h"
#include "support/test_support.h"

namespace ebpf {
namespace {

namespace fs = std::filesystem;
using pyperf_fixture::RunningCapture;

NameKey Key(uint64_t ino, uint64_t offset) { return NameKey{FileId{8, ino}, offset}; }

CachedName Name(const std::string& text) { return {text, /*elf_vaddr=*/0, /*symbolized=*/true}; }

TEST(ProcNameCacheTest, UsesCachedNameAfterFirstLookup) {
  ProcNameCache cache;
  EXPECT_EQ(cache.Lookup(Key(1, 0x10)), nullptr);
  cache.Insert(Key(1, 0x10), Name("deflate"));
  const CachedName* hit = cache.Lookup(Key(1, 0x10));
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->text, "deflate");
  EXPECT_EQ(cache.Lookup(Key(2, 0x10)), nullptr);  // same offset, other file
  CacheStats s = cache.stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 2u);
  EXPECT_EQ(s.entries, 1u);
  EXPECT_GT(s.bytes, 0u);
  EXPECT_DOUBLE_EQ(s.hit_rate(), 1.0 / 3.0);
}

TEST(ProcNameCacheTest, FloodOfDistinctAddressesKeepsBothBounds) {
  CacheLimits limits;
  limits.max_entries = 1000;
  limits.max_bytes = 64 * 1024;
  ProcNameCache cache(limits);
  const int kInserts = 200000;
  for (int i = 0; i < kInserts; ++i) {
    cache.Insert(Key(1 + i % 7, static_cast<uint64_t>(i) * 16),
                 Name(std::string(10 + i % 190, 'x')));
    CacheStats s = cache.stats();
    ASSERT_LE(s.entries, limits.max_entries);
    ASSERT_LE(s.bytes, limits.max_bytes);
  }
  CacheStats s = cache.stats();
  EXPECT_EQ(s.evictions, kInserts - s.entries);
  // The most recent entry survives; the oldest are gone.
  EXPECT_NE(cache.Lookup(Key(1 + (kInserts - 1) % 7, uint64_t{kInserts - 1} * 16)), nullptr);
  EXPECT_EQ(cache.Lookup(Key(1, 0)), nullptr);
}

TEST(ProcNameCacheTest, EvictsEntriesUnusedForMaxAgeRounds) {
  CacheLimits limits;
  limits.max_age_rounds = 3;
  ProcNameCache cache(limits);
  cache.Insert(Key(1, 1), Name("kept"));
  cache.Insert(Key(1, 2), Name("aged"));
  for (int round = 0; round < 6; ++round) {
    ASSERT_NE(cache.Lookup(Key(1, 1)), nullptr) << round;  // used every round
    cache.EndRound();
  }
  EXPECT_EQ(cache.stats().entries, 1u);
  EXPECT_EQ(cache.stats().evictions, 1u);
  EXPECT_EQ(cache.Lookup(Key(1, 2)), nullptr);
}

TEST(ProcNameCacheTest, EraseFileDropsOnlyThatFilesNames) {
  ProcNameCache cache;
  cache.Insert(Key(1, 1), Name("a"));
  cache.Insert(Key(1, 2), Name("b"));
  cache.Insert(Key(2, 1), Name("c"));
  EXPECT_EQ(cache.EraseFile(FileId{8, 1}), 2u);
  EXPECT_EQ(cache.stats().entries, 1u);
  EXPECT_NE(cache.Lookup(Key(2, 1)), nullptr);
}

class NativeCacheTest : public pyperf_fixture::NativeFixtureTest {
 protected:
  static bool HasName(const std::vector<NativeFrame>& frames, const std::string& name) {
    return std::any_of(frames.begin(), frames.end(),
                       [&](const NativeFrame& f) { return f.name == name; });
  }
};

TEST_F(NativeCacheTest, SecondUnwindOfAStackIsAllHits) {
  auto run = Start("debuglink", 2);
  ASSERT_TRUE(run);
  NativeUnwinder unwinder;
  auto first = Unwind(unwinder, run->snapshot.View());
  CacheStats before = unwinder.stats().names;
  std::set<uint64_t> distinct;  // recursion repeats return addresses
  for (const auto& f : first) distinct.insert(f.address);
  EXPECT_EQ(before.misses, distinct.size());
  EXPECT_EQ(before.hits, first.size() - distinct.size());
  auto second = Unwind(unwinder, run->snapshot.View());
  CacheStats after = unwinder.stats().names;
  EXPECT_EQ(Names(first), Names(second));
  EXPECT_EQ(after.misses, before.misses);
  EXPECT_EQ(after.hits - before.hits, second.size());
}

TEST_F(NativeCacheTest, ProcessesSharingFilesShareEntries) {
  auto a = Start("stripped", 2);
  auto b = Start("stripped", 2);
  ASSERT_TRUE(a && b);
  ASSERT_NE(a->snapshot.pid, b->snapshot.pid);
  NativeUnwinder unwinder;
  auto frames_a = Unwind(unwinder, a->snapshot.View());
  NativeUnwinderStats s1 = unwinder.stats();
  auto frames_b = Unwind(unwinder, b->snapshot.View());
  NativeUnwinderStats s2 = unwinder.stats();
  EXPECT_EQ(Names(frames_a), Names(frames_b));
  // Different pids, different load addresses (ASLR), same files: all hits.
  EXPECT_EQ(s2.names.misses, s1.names.misses);
  EXPECT_EQ(s2.names.hits - s1.names.hits, frames_b.size());
  EXPECT_EQ(s2.names.entries, s1.names.entries);
  EXPECT_EQ(s2.modules.misses, s1.modules.misses);  // no file loaded twice
  EXPECT_EQ(s2.processes, 2u);
}

TEST_F(NativeCacheTest, ExecUnderTheSamePidShowsNoOldNames) {
  // Three ways the exec is noticed: the round's check (cache_eviction), a
  // new process_key from BPF, or the leaf ip falling outside the old mappings.
  for (int mode = 0; mode < 3; ++mode) {
    SCOPED_TRACE(mode);
    pyperf_test::TempDir after;
    auto run =
        Start("debuglink", 1,
              {"--exec-on-trigger", after.path(), pyperf_fixture::FixtureLibraryPath("stripped")});
    ASSERT_TRUE(run);
    NativeUnwinder unwinder;
    NativeSnapshot before = run->snapshot.View();
    before.process_key = 1;
    auto old_frames = Unwind(unwinder, before);
    ASSERT_TRUE(HasName(old_frames, "fixture_static_step")) << Join(Names(old_frames));

    std::ofstream(run->capture_dir() + "/trigger") << "go\n";
    ASSERT_TRUE(pyperf_fixture::WaitForCapture(after.path(), std::chrono::seconds(30)));
    auto exec_capture = pyperf_fixture::ReadCapture(after.path());
    ASSERT_TRUE(exec_capture.ok()) << exec_capture.error();
    ASSERT_EQ(exec_capture->pid, run->snapshot.pid);

    NativeSnapshot now = exec_capture->View();
    if (mode == 0) unwinder.cache_eviction();
    now.process_key = mode == 1 ? 2 : 0;
    auto frames = Unwind(unwinder, now);
    EXPECT_FALSE(HasName(frames, "fixture_static_step")) << Join(Names(frames));
    ASSERT_GE(frames.size(), 3u) << Join(Names(frames));
    EXPECT_EQ(frames[0].name, "pyperf_capture_here");
    EXPECT_EQ(frames[1].name.rfind("libpyperf_fixture_c.so+0x", 0), 0u) << frames[1].name;
    EXPECT_EQ(frames[2].name, "pyperf_fixture_middle");
    EXPECT_GE(unwinder.stats().processes_dropped, 1u);
  }
}

TEST_F(NativeCacheTest, ReusedPidShowsNoOldNames) {
  auto a = Start("debuglink", 0);
  ASSERT_TRUE(a);
  NativeUnwinder unwinder;
  auto old_frames = Unwind(unwinder, a->snapshot.View());
  ASSERT_TRUE(HasName(old_frames, "fixture_static_step"));
  const pid_t pid = a->snapshot.pid;
  a->Kill();

  // Ask the kernel for the same pid again (root only; other forks may race).
  std::unique_ptr<RunningCapture> b;
  for (int attempt = 0; attempt < 20 && !b; ++attempt) {
    std::ofstream last("/proc/sys/kernel/ns_last_pid");
    if (!last) break;
    last << pid - 1 << std::flush;
    if (!last) break;
    last.close();
    auto candidate = Start("stripped", 0);
    if (candidate && candidate->snapshot.pid == pid) b = std::move(candidate);
  }
  if (!b) PYPERF_SKIP_OR_FAIL("could not get pid " + std::to_string(pid) + " reused here");

  unwinder.cache_eviction();  // the round boundary the sampling loop runs
  auto frames = Unwind(unwinder, b->snapshot.View());
  EXPECT_FALSE(HasName(frames, "fixture_static_step")) << Join(Names(frames));
  ASSERT_GE(frames.size(), 3u);
  EXPECT_EQ(frames[1].name.rfind("libpyperf_fixture_c.so+0x", 0), 0u) << frames[1].name;
}

TEST_F(NativeCacheTest, ForgetProcessAndExitsDropPerProcessState) {
  auto a = Start("stripped", 0);
  auto b = Start("stripped", 0);
  ASSERT_TRUE(a && b);
  NativeUnwinder unwinder;
  Unwind(unwinder, a->snapshot.View());
  Unwind(unwinder, b->snapshot.View());
  EXPECT_EQ(unwinder.stats().processes, 2u);
  unwinder.ForgetProcess(a->snapshot.pid);
  EXPECT_EQ(unwinder.stats().processes, 1u);
  b->Kill();
  unwinder.cache_eviction();
  NativeUnwinderStats s = unwinder.stats();
  EXPECT_EQ(s.processes, 0u);
  EXPECT_EQ(s.processes_dropped, 2u);
  // File-keyed names survive: they are not per process.
  EXPECT_GT(s.names.entries, 0u);
}

TEST_F(NativeCacheTest, UnwinderFloodKeepsNameCacheBounds) {
  auto run = Start("stripped", 0);
  ASSERT_TRUE(run);
  NativeUnwinderOptions options;
  options.max_depth = 1;  // only the leaf: one new address per unwind
  options.name_cache_limits.max_entries = 500;
  options.name_cache_limits.max_bytes = 48 * 1024;
  NativeUnwinder unwinder(options);
  NativeUnwinder reference;
  auto expected = Unwind(reference, run->snapshot.View());

  // Every 16th byte of libc's executable mapping as a leaf ip.
  uint64_t start = 0, end = 0;
  for (const auto& line : pyperf_test::SplitLines(run->snapshot.maps)) {
    unsigned long long s, e;
    char perms[8];
    if (line.find("libc.so.6") != std::string::npos &&
        sscanf(line.c_str(), "%llx-%llx %7s", &s, &e, perms) == 3 && perms[2] == 'x') {
      start = s;
      end = e;
    }
  }
  ASSERT_NE(start, 0u);
  NativeSnapshot s = run->snapshot.View();
  std::vector<NativeFrame> frames;
  int n = 0;
  for (uint64_t ip = start; ip < end && n < 20000; ip += 16, ++n) {
    s.ip = ip;
    unwinder.Unwind(s, &frames);
    ASSERT_EQ(frames.size(), 1u);
    CacheStats names = unwinder.stats().names;
    ASSERT_LE(names.entries, options.name_cache_limits.max_entries);
    ASSERT_LE(names.bytes, options.name_cache_limits.max_bytes);
  }
  EXPECT_GT(unwinder.stats().names.evictions, 0u);
  unwinder.cache_eviction();
  // After the flood, full stacks are still right.
  NativeUnwinderOptions full = options;
  full.max_depth = 128;
  NativeUnwinder after(full);
  EXPECT_EQ(Names(Unwind(after, run->snapshot.View())), Names(expected));
}

TEST_F(NativeCacheTest, TinyModuleCacheStillNamesEverything) {
  auto run = Start("debuglink", 1);
  ASSERT_TRUE(run);
  NativeUnwinder reference;
  auto expected = Unwind(reference, run->snapshot.View());
  NativeUnwinderOptions options;
  options.module_cache_limits.max_entries = 1;
  NativeUnwinder unwinder(options);
  EXPECT_EQ(Names(Unwind(unwinder, run->snapshot.View())), Names(expected));
  EXPECT_LE(unwinder.stats().modules.entries, 1u);
  EXPECT_GT(unwinder.stats().modules.evictions, 0u);
}

TEST_F(NativeCacheTest, ChangedFileBehindTheSameInodeIsReloaded) {
  // A copy of the stripped library we may modify in place (same inode).
  pyperf_test::TempDir libdir;
  fs::copy_file(FixtureDir() + "/stripped/libpyperf_fixture_c.so",
                libdir.File("libpyperf_fixture_c.so"));
  std::map<std::string, std::string> env = {
      {"LD_LIBRARY_PATH", libdir.path() + ":" + FixtureDir()}};
  std::string error;
  std::vector<std::string> argv = {FixtureDir() + "/native_fixture", "--depth", "0"};
  auto a = pyperf_fixture::StartCapture(argv, env, &error);
  ASSERT_TRUE(a) << error;
  NativeUnwinder unwinder;
  Unwind(unwinder, a->snapshot.View());
  uint64_t module_misses = unwinder.stats().modules.misses;

  // Same content, new mtime: as if the file behind that inode had changed.
  fs::last_write_time(libdir.File("libpyperf_fixture_c.so"),
                      fs::file_time_type::clock::now() + std::chrono::hours(1));
  auto b = pyperf_fixture::StartCapture(argv, env, &error);
  ASSERT_TRUE(b) << error;
  auto frames = Unwind(unwinder, b->snapshot.View());
  EXPECT_EQ(unwinder.stats().modules.misses, module_misses + 1);  // reloaded, once
  pyperf_fixture::ExpectFixtureMiddleAtFrame2(frames);
}

TEST_F(NativeCacheTest, UncachedPathLeavesTheCachesAlone) {
  auto run = Start("stripped", 0);
  ASSERT_TRUE(run);
  NativeUnwinderOptions options;
  options.cache_enabled = false;
  NativeUnwinder unwinder(options);
  auto frames = Unwind(unwinder, run->snapshot.View());
  EXPECT_GE(frames.size(), 4u);
  NativeUnwinderStats s = unwinder.stats();
  EXPECT_EQ(s.names.hits + s.names.misses, 0u);
  EXPECT_EQ(s.names.entries, 0u);
  EXPECT_EQ(s.modules.entries, 0u);
  EXPECT_EQ(s.processes, 0u);
}

}  // namespace
}  // namespace ebpf
