// Tests for the output protocol gProfiler reads: the transient PATH, the
// time-stamped renames, aggregation of samples and their dictionary, the
// collapsed text, and errors as values.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "FrameSpelling.h"
#include "ProfileOutput.h"
#include "PyPerfBpfShared.h"
#include "support/e2e.h"
#include "support/test_stack.h"
#include "support/test_support.h"

namespace ebpf::pyperf {
namespace {

using pyperf_test::DumpedFiles;
using pyperf_test::FileExists;
using pyperf_test::Intern;
using pyperf_test::ReadFile;
using pyperf_test::TempDir;
using pyperf_test::TestStack;
using Clock = ProfileOutput::Clock;

// Counts `count` samples of `stack`, interned as the sample assembler does.
void Add(ProfileOutput* out, const TestStack& stack, uint64_t count = 1) {
  out->Add(Intern(stack, &out->dictionary()), count);
}

// Dumps `out` and gives the text of its collapsed file (a failure and "" if
// the dump failed).
std::string DumpedText(ProfileOutput* out) {
  auto dumped = out->Dump();
  EXPECT_TRUE(dumped.ok()) << dumped.error();
  return dumped.ok() ? ReadFile(dumped->file) : "";
}

// A stack of native frames in no known file: each spelled "<name>_[pn]".
TestStack Natives(const std::string& comm, uint32_t pid, uint32_t tid,
                  const std::vector<std::string>& names) {
  TestStack stack(comm, pid, tid);
  for (const std::string& name : names) stack.Native(name);
  return stack;
}

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
  Add(&out, Natives("python", 10, 10, {"a", "b"}));
  Add(&out, Natives("python", 10, 10, {"a", "c"}), 2);
  Add(&out, Natives("python", 10, 10, {"a", "b"}));
  Add(&out, Natives("python", 11, 12, {"x"}));
  EXPECT_EQ(out.pending_samples(), 5u);
  EXPECT_EQ(out.pending_stacks(), 3u);

  auto dumped = out.Dump(SomeTime() + std::chrono::seconds(60));
  ASSERT_TRUE(dumped.ok()) << dumped.error();
  EXPECT_EQ(dumped->file, path + ".2024030506070809");
  EXPECT_EQ(dumped->samples, 5u);
  EXPECT_EQ(dumped->lines, 3u);
  EXPECT_EQ(ReadFile(dumped->file),
            "python-10/10;a_[pn];b_[pn] 2\n"
            "python-10/10;a_[pn];c_[pn] 2\n"
            "python-11/12;x_[pn] 1\n");
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
    Add(&out, Natives("python", 1, 1, {"f" + std::to_string(i)}), static_cast<uint64_t>(i + 1));
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
    EXPECT_EQ(ReadFile(names[i]),
              "python-1/1;f" + std::to_string(i) + "_[pn] " + std::to_string(i + 1) + "\n");
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
  Add(&out, Natives("python", 1, 1, {"s"}));
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

TEST(ProfileOutput, NewlineInANameCannotSplitALine) {
  TempDir dir;
  ProfileOutput out(dir.File("p.col"));
  ASSERT_TRUE(out.Start().ok());
  Add(&out, Natives("python", 1, 1, {"a", "b\nc"}), 3);
  EXPECT_EQ(DumpedText(&out), "python-1/1;a_[pn];b_c_[pn] 3\n");
}

// A failed dump keeps the samples and the dictionary their names are in: the
// next dump writes them, with the samples added since, under their names.
TEST(ProfileOutput, RemovedDirectoryGivesAnErrorAndKeepsTheSamples) {
  TempDir parent;
  std::string dir = parent.File("out");
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  std::string path = dir + "/p.col";
  ProfileOutput out(path);
  ASSERT_TRUE(out.Start(SomeTime()).ok());
  Add(&out,
      TestStack("python", 5, 5)
          .Python("Handler.run", "/srv/app.py", 12)
          .Native("memcpy", "/lib/libc.so.6", "0123abcd", 0x1234),
      2);
  const uint64_t generation = out.dictionary().generation();
  ASSERT_EQ(unlink(path.c_str()), 0);
  ASSERT_EQ(rmdir(dir.c_str()), 0);

  auto failed = out.Dump();
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.error().find(path), std::string::npos) << failed.error();
  EXPECT_NE(failed.error().find("its 2 samples are kept for the next dump"), std::string::npos)
      << failed.error();
  EXPECT_EQ(out.pending_samples(), 2u);
  EXPECT_EQ(out.dictionary().generation(), generation);
  // Still failing while the directory is gone.
  Add(&out, TestStack("python", 5, 5).Python("main", "/srv/app.py", 30), 1);
  EXPECT_FALSE(out.Dump().ok());
  EXPECT_EQ(out.dictionary().generation(), generation);

  // Once it is back, every sample is delivered exactly once, stamped with the
  // start of the interval they were taken in.
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  auto delivered = out.Dump();
  ASSERT_TRUE(delivered.ok()) << delivered.error();
  EXPECT_EQ(delivered->file, path + ".2024030506070809");
  EXPECT_EQ(ReadFile(delivered->file),
            "python-5/5;srv.app.Handler.run (/srv/app.py:12)_[p];memcpy_[pn] 2\n"
            "python-5/5;srv.app.main (/srv/app.py:30)_[p] 1\n");
  EXPECT_EQ(delivered->samples, 3u);
  EXPECT_NE(out.dictionary().generation(), generation);
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
  // More than a stdio buffer: several writes.
  Add(&out, Natives("python", 1, 1, {std::string(10000, 'a')}), 2);

  auto failed = out.Dump();
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.error().find("cannot write " + path + ": No space left on device"),
            std::string::npos)
      << failed.error();
  EXPECT_NE(failed.error().find("its 2 samples are kept for the next dump"), std::string::npos)
      << failed.error();
  EXPECT_EQ(out.pending_samples(), 2u);
  EXPECT_EQ(DumpedFiles(dir.File("p.col")), std::vector<std::string>{});

  Add(&out, Natives("python", 1, 1, {"b"}));
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
  Add(&out, Natives("python", 1, 1, {"a"}), 2);
  auto dumped = out.FinalDump();
  ASSERT_TRUE(dumped.ok()) << dumped.error();
  EXPECT_EQ(ReadFile(dumped->file), "python-1/1;a_[pn] 2\n");
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
  Add(&out, Natives("python", 1, 2, {"b", "c"}), 4);
  Add(&out, Natives("python", 1, 1, {"a"}));
  auto first = out.Dump();
  ASSERT_TRUE(first.ok()) << first.error();
  EXPECT_EQ(first->file, "");
  EXPECT_EQ(first->samples, 5u);
  EXPECT_EQ(first->lines, 2u);
  Add(&out, Natives("python", 1, 1, {"a"}));
  ASSERT_TRUE(out.Dump().ok());
  fclose(stream);
  EXPECT_EQ(ReadFile(capture),
            "python-1/1;a_[pn] 1\n"
            "python-1/2;b_[pn];c_[pn] 4\n"
            "python-1/1;a_[pn] 1\n");
}

TEST(ProfileOutput, StreamWriteErrorIsAStatus) {
  FILE* full = fopen("/dev/full", "w");
  if (full == nullptr) GTEST_SKIP() << "no /dev/full";
  ProfileOutput out("", full);
  ASSERT_TRUE(out.Start().ok());
  Add(&out, Natives("python", 1, 1, {"a"}));
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
  Add(&out, TestStack("python3", 1, 1).Python("f", "/srv/app.py", 3), 4);
  auto dumped = out.Dump(SomeTime() + std::chrono::seconds(1));
  ASSERT_TRUE(dumped.ok()) << dumped.error();
  const std::string stamp = dir.File("p.2024030506070809");
  EXPECT_EQ(dumped->file, stamp);
  EXPECT_EQ(dumped->files,
            (std::vector<std::string>{stamp, stamp + ".html", stamp + ".speedscope.json",
                                      stamp + ".pb.gz"}));
  EXPECT_EQ(dumped->samples, 4u);
  EXPECT_EQ(ReadFile(stamp), "python3-1/1;srv.app.f (/srv/app.py:3)_[p] 4\n");
  for (const auto& file : dumped->files) EXPECT_FALSE(ReadFile(file).empty()) << file;
  EXPECT_TRUE(FileExists(dir.File("p")));  // the fresh transient file
  EXPECT_EQ(DumpedFiles(dir.File("p")).size(), 4u);
}

TEST(ProfileOutput, TheStampIsOneNoFormatHasTaken) {
  TempDir dir;
  ProfileOutput out(dir.File("p"), stdout, {ProfileFormat::kCollapsed, ProfileFormat::kFlameGraph});
  ASSERT_TRUE(out.Start(SomeTime()).ok());
  Add(&out, TestStack("c", 1, 1).Python("f", "/srv/app.py", 3));
  // A leftover page holds the stamp: both files move to the next one.
  std::FILE* leftover = std::fopen(dir.File("p.2024030506070809.html").c_str(), "w");
  ASSERT_NE(leftover, nullptr);
  std::fclose(leftover);
  auto dumped = out.Dump();
  ASSERT_TRUE(dumped.ok()) << dumped.error();
  EXPECT_EQ(dumped->files, (std::vector<std::string>{dir.File("p.2024030506070810"),
                                                     dir.File("p.2024030506070810.html")}));
}

// A ProfileOutput writing collapsed files, started.
class CollapsedDump : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(out_.Start().ok()); }

  TempDir dir_;
  ProfileOutput out_{dir_.File("p.col")};
};

// Samples are counted as data: one equal to a sample already seen (its
// strings interned again) adds to that sample's count and to nothing else.
TEST_F(CollapsedDump, EqualSamplesShareACount) {
  auto of_thread = [](uint32_t tid) {
    return TestStack("python3", 1, tid)
        .Python("Handler.run", "/srv/app.py", 12)
        .Native("memcpy", "/lib/libc.so.6", "0123abcd", 0x1234)
        .Kernel("vfs_read");
  };
  Add(&out_, of_thread(2), 2);
  const size_t strings = out_.dictionary().strings();
  const size_t objects = out_.dictionary().objects();
  Add(&out_, of_thread(2));
  Add(&out_, of_thread(2), 4);
  EXPECT_EQ(out_.pending_stacks(), 1u);
  EXPECT_EQ(out_.pending_samples(), 7u);
  EXPECT_EQ(out_.dictionary().strings(), strings);
  EXPECT_EQ(out_.dictionary().objects(), objects);
  // Another line (thread) is another sample.
  Add(&out_, of_thread(3));
  EXPECT_EQ(out_.pending_stacks(), 2u);
  EXPECT_EQ(DumpedText(&out_),
            "python3-1/2;srv.app.Handler.run (/srv/app.py:12)_[p];memcpy_[pn];vfs_read_[k] 7\n"
            "python3-1/3;srv.app.Handler.run (/srv/app.py:12)_[p];memcpy_[pn];vfs_read_[k] 1\n");
}

// pprof keeps each native address, but gProfiler's text names a native frame
// by its symbol alone: samples that differ only there are one collapsed line.
TEST_F(CollapsedDump, SamplesDifferingOnlyInNativeAddressAreOneCollapsedLine) {
  auto at = [](const std::string& file, uint64_t address) {
    return TestStack("python3", 1, 1)
        .Python("main", "/srv/app.py", 3)
        .Native("memcpy", file, file.empty() ? "" : "0123abcd", address);
  };
  Add(&out_, at("/lib/libc.so.6", 0x1234), 2);
  Add(&out_, TestStack("python3", 1, 1).Python("main", "/srv/app.py", 4));
  Add(&out_, at("/lib/libc.so.6", 0x1238));
  Add(&out_, at("/lib/libc.so.6", 0x1234));
  Add(&out_, at("", 0), 5);  // in no known file
  EXPECT_EQ(out_.pending_stacks(), 4u);
  EXPECT_EQ(out_.pending_samples(), 10u);
  EXPECT_EQ(DumpedText(&out_),
            "python3-1/1;srv.app.main (/srv/app.py:3)_[p];memcpy_[pn] 9\n"
            "python3-1/1;srv.app.main (/srv/app.py:4)_[p] 1\n");
}

// The interval's strings go with its samples once a dump delivered them: a
// host profiled for months does not keep every name it ever saw.
TEST_F(CollapsedDump, ADeliveredDumpEmptiesTheDictionary) {
  Add(&out_, TestStack("python3", 1, 1)
                 .Python("main", "/srv/app.py", 3)
                 .Native("memcpy", "/lib/libc.so.6", "0123abcd", 0x1234));
  const uint64_t generation = out_.dictionary().generation();
  EXPECT_GT(out_.dictionary().strings(), 1u);
  EXPECT_EQ(out_.dictionary().objects(), 2u);
  ASSERT_TRUE(out_.Dump().ok());
  EXPECT_NE(out_.dictionary().generation(), generation);
  EXPECT_EQ(out_.dictionary().strings(), 1u);  // "" only
  EXPECT_EQ(out_.dictionary().objects(), 1u);  // "unknown" only
  // The next interval names its own strings afresh.
  Add(&out_, TestStack("python3", 1, 1).Python("other", "/srv/other.py", 8));
  EXPECT_EQ(DumpedText(&out_), "python3-1/1;srv.other.other (/srv/other.py:8)_[p] 1\n");
}

// Every kind of frame as gProfiler reads it, byte for byte: markers, Python
// frames of a script, a package's __init__.py, a frozen module and a code
// object without a file, native and kernel frames; ';' and line breaks in
// names and paths become '_'.
TEST_F(CollapsedDump, CollapsedOutputSpellsEveryKindOfFrame) {
  Add(&out_,
      TestStack("python3", 4242, 4243)
          .Marker(std::string(kTruncatedPythonStack))
          .Python("<module>", "/srv/app/main.py", 1)
          .Python("f", "/srv/app/pkg/__init__.py", 5)
          .Python("_find_and_load", "<frozen importlib._bootstrap>", 1360)
          .Python("g", "", 0)
          .Marker(std::string(kLostSymbol))
          .Python("Weird;Class.meth\nod", "/srv/a;b/c\r.py", 9)
          .Marker(NativeStackErrorText("unw_step (unspecified; error)"))
          .Native("_PyEval_EvalFrameDefault", "/usr/lib/libpython3.11.so.1.0", "abcd", 0x1000)
          .Native("operator new;\xe2\x80\xa8x", "/lib/libstdc++.so.6", "", 0x2000)
          .Native("memcpy")
          .Kernel("do_syscall_64")
          .Kernel("vfs_read\n"),
      3);
  Add(&out_, TestStack("python3", 4242, 4244).Marker(std::string(kNoFrames)), 2);
  Add(&out_, TestStack("my;app", 7, 7).Marker(SampleErrorText(PYPERF_ERROR_NO_INTERPRETER)));
  EXPECT_EQ(DumpedText(&out_),
            "my_app-7/7;[Sample Error NO_INTERPRETER]_[pe] 1\n"
            "python3-4242/4243;[Truncated Python Stack]_[pe];"
            "srv.app.main.<module> (/srv/app/main.py:1)_[p];"
            "srv.app.pkg.f (/srv/app/pkg/__init__.py:5)_[p];"
            "importlib._bootstrap._find_and_load (<frozen importlib._bootstrap>:1360)_[p];"
            "g (:0)_[p];[Lost Symbol]_[pe];"
            "srv.a_b.c_.Weird_Class.meth_od (/srv/a_b/c_.py:9)_[p];"
            "[Native Stack Error: unw_step (unspecified_ error)]_[pe];"
            "_PyEval_EvalFrameDefault_[pn];operator new__x_[pn];memcpy_[pn];"
            "do_syscall_64_[k];vfs_read__[k] 3\n"
            "python3-4242/4244;[No Frames]_[pe] 2\n");
}

}  // namespace
}  // namespace ebpf::pyperf
