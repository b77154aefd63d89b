// Tests for the output protocol gProfiler reads: the transient PATH, the
// time-stamped renames, aggregation, and errors as values.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "ProfileOutput.h"
#include "support/e2e.h"
#include "support/test_support.h"

namespace pyperf {
namespace {

using pyperf_test::DumpedFiles;
using pyperf_test::FileExists;
using pyperf_test::ReadFile;
using pyperf_test::TempDir;
using Clock = ProfileOutput::Clock;

// 2024-03-05 06:07:08.09 UTC.
Clock::time_point SomeTime() {
  return Clock::time_point(std::chrono::seconds(1709618828)) + std::chrono::milliseconds(90);
}

// PATH.<16 digits>: YYYYmmddHHMMSS and two digits of centiseconds.
bool IsDumpName(const std::string& path, const std::string& name) {
  if (name.size() != path.size() + 17 || name.compare(0, path.size() + 1, path + ".") != 0)
    return false;
  return std::all_of(name.begin() + static_cast<long>(path.size()) + 1, name.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

TEST(ProfileOutput, TimestampIsUtcWithCentiseconds) {
  EXPECT_EQ(ProfileOutput::Timestamp(SomeTime()), "2024030506070809");
}

TEST(ProfileOutput, TransientFileExistsAfterStart) {
  TempDir dir;
  std::string path = dir.File("pyperf.abcdefghijklmnop.col");
  ProfileOutput out(path);
  EXPECT_FALSE(FileExists(path));
  ASSERT_TRUE(out.Start().ok());
  EXPECT_TRUE(FileExists(path));
  // Nothing that gProfiler's "PATH.*" glob would pick up yet.
  EXPECT_TRUE(DumpedFiles(dir.File("pyperf.abcdefghijklmnop.col")).empty());
}

TEST(ProfileOutput, DumpRenamesToStartOfIntervalAndAggregates) {
  TempDir dir;
  std::string path = dir.File("pyperf.col");
  ProfileOutput out(path);
  ASSERT_TRUE(out.Start(SomeTime()).ok());
  out.Add("python-10/10;a;b");
  out.Add("python-10/10;a;c", 2);
  out.Add("python-10/10;a;b");
  out.Add("python-11/12;x");
  EXPECT_EQ(out.pending_samples(), 5u);
  EXPECT_EQ(out.pending_stacks(), 3u);

  auto dumped = out.Dump(SomeTime() + std::chrono::seconds(60));
  ASSERT_TRUE(dumped.ok()) << dumped.error();
  EXPECT_EQ(dumped->file, path + ".2024030506070809");
  EXPECT_EQ(dumped->samples, 5u);
  EXPECT_EQ(dumped->lines, 3u);
  EXPECT_EQ(ReadFile(dumped->file),
            "python-10/10;a;b 2\n"
            "python-10/10;a;c 2\n"
            "python-11/12;x 1\n");
  // A fresh, empty transient file for the next interval; nothing pending.
  EXPECT_TRUE(FileExists(path));
  EXPECT_EQ(ReadFile(path), "");
  EXPECT_EQ(out.pending_samples(), 0u);
  EXPECT_EQ(out.pending_stacks(), 0u);
}

TEST(ProfileOutput, DumpedNamesMatchTheProtocolAndSortByTime) {
  TempDir dir;
  std::string path = dir.File("pyperf.x.col");
  ProfileOutput out(path);
  ASSERT_TRUE(out.Start().ok());
  std::vector<std::string> names;
  for (int i = 0; i < 4; ++i) {
    out.Add("stack" + std::to_string(i), static_cast<uint64_t>(i + 1));
    auto dumped = out.Dump();  // real clock: several dumps within one centisecond
    ASSERT_TRUE(dumped.ok()) << dumped.error();
    names.push_back(dumped->file);
  }
  for (const auto& name : names) EXPECT_TRUE(IsDumpName(path, name)) << name;
  // Distinct, and sorting by name gives the order they were written in.
  auto sorted = names;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, names);
  EXPECT_EQ(std::unique(sorted.begin(), sorted.end()), sorted.end());
  EXPECT_EQ(DumpedFiles(dir.File("pyperf.x.col")), names);
  // Each holds only its own interval's samples.
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(ReadFile(names[i]), "stack" + std::to_string(i) + " " + std::to_string(i + 1) + "\n");
}

TEST(ProfileOutput, SameStartTimeIsBumpedToSortAfter) {
  TempDir dir;
  std::string path = dir.File("p.col");
  ProfileOutput out(path);
  ASSERT_TRUE(out.Start(SomeTime()).ok());
  auto first = out.Dump(SomeTime());  // next interval starts at the same instant
  auto second = out.Dump(SomeTime());
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->file, path + ".2024030506070809");
  EXPECT_EQ(second->file, path + ".2024030506070810");
}

TEST(ProfileOutput, ClockGoingBackStillSortsAfter) {
  TempDir dir;
  std::string path = dir.File("p.col");
  ProfileOutput out(path);
  ASSERT_TRUE(out.Start(SomeTime()).ok());
  auto first = out.Dump(SomeTime() - std::chrono::hours(1));
  auto second = out.Dump(SomeTime());
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_LT(first->file, second->file);
}

TEST(ProfileOutput, ExistingFileWithTheSameNameIsNotOverwritten) {
  TempDir dir;
  std::string path = dir.File("p.col");
  std::string taken = path + ".2024030506070809";
  FILE* f = fopen(taken.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("unread dump\n", f);
  fclose(f);
  ProfileOutput out(path);
  ASSERT_TRUE(out.Start(SomeTime()).ok());
  out.Add("s");
  auto dumped = out.Dump();
  ASSERT_TRUE(dumped.ok()) << dumped.error();
  EXPECT_EQ(dumped->file, path + ".2024030506070810");
  EXPECT_EQ(ReadFile(taken), "unread dump\n");
}

TEST(ProfileOutput, EmptyIntervalStillProducesAFile) {
  TempDir dir;
  std::string path = dir.File("p.col");
  ProfileOutput out(path);
  ASSERT_TRUE(out.Start().ok());
  auto dumped = out.Dump();
  ASSERT_TRUE(dumped.ok()) << dumped.error();
  EXPECT_TRUE(FileExists(dumped->file));
  EXPECT_EQ(ReadFile(dumped->file), "");
  EXPECT_EQ(dumped->samples, 0u);
  EXPECT_EQ(dumped->lines, 0u);
}

TEST(ProfileOutput, NewlineInAStackCannotSplitALine) {
  TempDir dir;
  ProfileOutput out(dir.File("p.col"));
  ASSERT_TRUE(out.Start().ok());
  out.Add("a;b\nc", 3);
  auto dumped = out.Dump();
  ASSERT_TRUE(dumped.ok());
  EXPECT_EQ(ReadFile(dumped->file), "a;b c 3\n");
}

TEST(ProfileOutput, RemovedDirectoryGivesAnErrorAndKeepsTheSamples) {
  TempDir parent;
  std::string dir = parent.File("out");
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  std::string path = dir + "/p.col";
  ProfileOutput out(path);
  ASSERT_TRUE(out.Start(SomeTime()).ok());
  out.Add("a", 2);
  ASSERT_EQ(unlink(path.c_str()), 0);
  ASSERT_EQ(rmdir(dir.c_str()), 0);

  auto failed = out.Dump();
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.error().find(path), std::string::npos) << failed.error();
  EXPECT_NE(failed.error().find("its 2 samples are kept for the next dump"), std::string::npos)
      << failed.error();
  EXPECT_EQ(out.pending_samples(), 2u);
  // Still failing while the directory is gone.
  out.Add("b");
  EXPECT_FALSE(out.Dump().ok());

  // Once it is back, every sample is delivered exactly once, stamped with the
  // start of the interval they were taken in.
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  auto delivered = out.Dump();
  ASSERT_TRUE(delivered.ok()) << delivered.error();
  EXPECT_EQ(delivered->file, path + ".2024030506070809");
  EXPECT_EQ(ReadFile(delivered->file), "a 2\nb 1\n");
  EXPECT_EQ(delivered->samples, 3u);
  EXPECT_TRUE(FileExists(path));
  auto next = out.Dump();
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(ReadFile(next->file), "");
}

// A write error (PATH is a link to /dev/full: every write fails with ENOSPC)
// leaves no PATH.<stamp> file, so none is ever partial; a failed final dump
// also removes PATH, which would otherwise tell a caller waiting for the next
// PyPerf on this PATH that it is ready.
TEST(ProfileOutput, FailedWriteDeliversNothingAndFailedFinalDumpRemovesPath) {
  if (access("/dev/full", W_OK) != 0) GTEST_SKIP() << "no writable /dev/full";
  TempDir dir;
  std::string path = dir.File("p.col");
  ASSERT_EQ(symlink("/dev/full", path.c_str()), 0);
  ProfileOutput out(path);
  ASSERT_TRUE(out.Start(SomeTime()).ok());
  out.Add(std::string(10000, 'a'), 2);  // more than a stdio buffer: several writes

  auto failed = out.Dump();
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.error().find("cannot write " + path + ": No space left on device"),
            std::string::npos)
      << failed.error();
  EXPECT_NE(failed.error().find("its 2 samples are kept for the next dump"), std::string::npos)
      << failed.error();
  EXPECT_EQ(out.pending_samples(), 2u);
  EXPECT_EQ(DumpedFiles(dir.File("p.col")), std::vector<std::string>{});

  out.Add("b");
  auto final_failed = out.FinalDump();
  ASSERT_FALSE(final_failed.ok());
  EXPECT_NE(final_failed.error().find("its 3 samples are lost"), std::string::npos)
      << final_failed.error();
  EXPECT_FALSE(FileExists(dir.File("p.col")));
  EXPECT_EQ(DumpedFiles(dir.File("p.col")), std::vector<std::string>{});
}

TEST(ProfileOutput, FinalDumpLeavesNoTransientFile) {
  TempDir dir;
  std::string path = dir.File("p.col");
  ProfileOutput out(path);
  ASSERT_TRUE(out.Start(SomeTime()).ok());
  out.Add("a", 2);
  auto dumped = out.FinalDump();
  ASSERT_TRUE(dumped.ok()) << dumped.error();
  EXPECT_EQ(ReadFile(dumped->file), "a 2\n");
  EXPECT_FALSE(FileExists(path));
  EXPECT_EQ(DumpedFiles(path), std::vector<std::string>{dumped->file});
}

TEST(ProfileOutput, StartFailsInMissingDirectory) {
  TempDir dir;
  ProfileOutput out(dir.File("missing/p.col"));
  Status s = out.Start();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("missing/p.col"), std::string::npos) << s.message();
}

TEST(ProfileOutput, WithoutPathWritesToTheStream) {
  TempDir dir;
  std::string capture = dir.File("stdout");
  FILE* stream = fopen(capture.c_str(), "w");
  ASSERT_NE(stream, nullptr);
  ProfileOutput out("", stream);
  ASSERT_TRUE(out.Start().ok());
  out.Add("b;c", 4);
  out.Add("a");
  auto first = out.Dump();
  ASSERT_TRUE(first.ok()) << first.error();
  EXPECT_EQ(first->file, "");
  EXPECT_EQ(first->samples, 5u);
  EXPECT_EQ(first->lines, 2u);
  out.Add("a");
  ASSERT_TRUE(out.Dump().ok());
  fclose(stream);
  EXPECT_EQ(ReadFile(capture), "a 1\nb;c 4\na 1\n");
}

TEST(ProfileOutput, StreamWriteErrorIsAStatus) {
  FILE* full = fopen("/dev/full", "w");
  if (full == nullptr) GTEST_SKIP() << "no /dev/full";
  ProfileOutput out("", full);
  ASSERT_TRUE(out.Start().ok());
  out.Add("a");
  auto dumped = out.Dump();
  EXPECT_FALSE(dumped.ok());
  EXPECT_NE(dumped.error().find("No space"), std::string::npos) << dumped.error();
  fclose(full);
}

// With several formats, each dump gives one complete file per format under
// one stamp, in the order given; the collapsed one keeps gProfiler's name.
TEST(ProfileOutput, SeveralFormatsShareOneStampAndKeepTheirExtensions) {
  TempDir dir;
  ProfileOutput out(dir.File("p"), stdout,
                    {ProfileFormat::kCollapsed, ProfileFormat::kFlameGraph,
                     ProfileFormat::kSpeedscope, ProfileFormat::kPprof});
  ASSERT_TRUE(out.Start(SomeTime()).ok());
  out.set_sample_period_ns(1000000);
  out.Add("python3-1/1;f_[p]", 4);
  auto dumped = out.Dump(SomeTime() + std::chrono::seconds(1));
  ASSERT_TRUE(dumped.ok()) << dumped.error();
  const std::string stamp = dir.File("p.2024030506070809");
  EXPECT_EQ(dumped->file, stamp);
  EXPECT_EQ(dumped->files,
            (std::vector<std::string>{stamp, stamp + ".html", stamp + ".speedscope.json",
                                      stamp + ".pb.gz"}));
  EXPECT_EQ(dumped->samples, 4u);
  EXPECT_EQ(ReadFile(stamp), "python3-1/1;f_[p] 4\n");
  for (const auto& file : dumped->files) EXPECT_FALSE(ReadFile(file).empty()) << file;
  EXPECT_TRUE(FileExists(dir.File("p")));  // the fresh transient file
  EXPECT_EQ(DumpedFiles(dir.File("p")).size(), 4u);
}

TEST(ProfileOutput, TheStampIsOneNoFormatHasTaken) {
  TempDir dir;
  ProfileOutput out(dir.File("p"), stdout, {ProfileFormat::kCollapsed, ProfileFormat::kFlameGraph});
  ASSERT_TRUE(out.Start(SomeTime()).ok());
  out.Add("c-1/1;f_[p]", 1);
  // A leftover page holds the stamp: both files move to the next one.
  std::FILE* leftover = std::fopen(dir.File("p.2024030506070809.html").c_str(), "w");
  ASSERT_NE(leftover, nullptr);
  std::fclose(leftover);
  auto dumped = out.Dump();
  ASSERT_TRUE(dumped.ok()) << dumped.error();
  EXPECT_EQ(dumped->files, (std::vector<std::string>{dir.File("p.2024030506070810"),
                                                     dir.File("p.2024030506070810.html")}));
}

}  // namespace
}  // namespace pyperf
