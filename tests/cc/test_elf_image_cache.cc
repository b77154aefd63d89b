// Tests for ElfImageCache: one parse per file identity and stamp, whoever asks
// (ElfFile for Python detection, NativeModule for native symbolization); a
// file rewritten in place parsed anew, never answered from the old image; and
// the entry and age bounds. Detection and native unwinding of one live Python
// process sharing a parse is in test_python_process.cc.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "elf_file.h"
#include "elf_image_cache.h"
#include "native_module.h"
#include "proc_maps.h"
#include "support/test_support.h"

namespace ebpf {
namespace {

using pyperf_test::TempDir;

std::string SelfExe() {
  auto exe = ReadProcessExePath(getpid());
  return exe.ok() ? *exe : "/proc/self/exe";
}

// Replaces the bytes of `path` with those of `from`, in place (same inode),
// and sets its mtime to `mtime_sec`.
void RewriteInPlace(const std::string& path, const std::string& from, time_t mtime_sec) {
  std::string bytes = pyperf_test::ReadFile(from);
  int fd = open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  struct timespec times[2] = {{mtime_sec, 0}, {mtime_sec, 0}};
  ASSERT_EQ(futimens(fd, times), 0);
  close(fd);
}

// A copy of /bin/true named `name` in `dir`: a file no cache has seen.
std::string CopyOfTrue(const TempDir& dir, const std::string& name) {
  std::string path = dir.File(name);
  EXPECT_EQ(pyperf_test::RunCommand({"cp", "/bin/true", path}).exit_code, 0);
  return path;
}

TEST(ElfImageCache, ParsesAFileOnceForEveryReader) {
  TempDir dir;
  std::string path = CopyOfTrue(dir, "libcopy.so");
  ElfImageCache cache;

  auto first = cache.GetPath(path);
  ASSERT_TRUE(first.ok()) << first.error();
  auto second = cache.GetPath(path);  // another open of the same file
  ASSERT_TRUE(second.ok()) << second.error();
  EXPECT_EQ(first->get(), second->get()) << "the same image";
  EXPECT_EQ(cache.stats().parses, 1u);
  EXPECT_EQ(cache.stats().cache.hits, 1u);

  // Both kinds of reader over the one image.
  ElfFile elf(path, *first);
  NativeModuleLoadOptions options;
  options.search_host_debug_dirs = false;
  auto module = NativeModule::Load(**second, options);
  ASSERT_TRUE(module.ok()) << module.error();
  EXPECT_EQ(elf.BuildId().value_or(""), (*module)->build_id());
  // The module keeps the image's bytes, not a copy of them.
  EXPECT_EQ((*module)->image().bytes().data(), (*first)->bytes().data());
  EXPECT_EQ(cache.stats().parses, 1u);
}

// A file rewritten in place keeps its device and inode; its size and mtime
// tell it apart, and the new bytes are parsed: never the old image's answer.
TEST(ElfImageCache, ParsesAFileRewrittenInPlaceAnew) {
  TempDir dir;
  std::string path = CopyOfTrue(dir, "librewritten.so");
  ElfImageCache cache;
  auto before = cache.GetPath(path);
  ASSERT_TRUE(before.ok()) << before.error();
  const std::string old_build_id = (*before)->BuildId();
  const FileStamp old_stamp = (*before)->file();

  // Larger than the old file: the old image's pages stay backed.
  RewriteInPlace(path, SelfExe(), old_stamp.mtime_ns / 1000000000 + 10);
  auto after = cache.GetPath(path);
  ASSERT_TRUE(after.ok()) << after.error();
  EXPECT_EQ(cache.stats().parses, 2u);
  EXPECT_NE(after->get(), before->get());
  EXPECT_TRUE((*after)->file().SameFile(old_stamp)) << "same device and inode";
  EXPECT_NE((*after)->file(), old_stamp);
  EXPECT_NE((*after)->BuildId(), old_build_id);
  EXPECT_EQ((*after)->BuildId(), ElfFile::Open(SelfExe())->BuildId().value_or(""));

  // Only the mtime changes (same size): still a new parse.
  RewriteInPlace(path, SelfExe(), old_stamp.mtime_ns / 1000000000 + 20);
  auto touched = cache.GetPath(path);
  ASSERT_TRUE(touched.ok()) << touched.error();
  EXPECT_EQ(cache.stats().parses, 3u);
  EXPECT_EQ((*touched)->file().size, (*after)->file().size);
}

TEST(ElfImageCache, IsBoundedByEntriesAndByAgeWhileHoldersKeepTheirImages) {
  TempDir dir;
  std::string a = CopyOfTrue(dir, "a.so"), b = CopyOfTrue(dir, "b.so");
  CacheLimits limits;
  limits.max_entries = 1;
  limits.max_age_rounds = 2;
  ElfImageCache cache(limits);

  auto held = cache.GetPath(a);
  ASSERT_TRUE(held.ok()) << held.error();
  ASSERT_TRUE(cache.GetPath(b).ok());
  EXPECT_EQ(cache.stats().cache.entries, 1u);
  EXPECT_EQ(cache.stats().cache.evictions, 1u);
  // Evicted, yet the holder's image is whole.
  EXPECT_EQ((*held)->bytes().substr(0, 4), "\177ELF");
  ASSERT_TRUE(cache.GetPath(a).ok());
  EXPECT_EQ(cache.stats().parses, 3u) << "a was evicted: parsed again";

  cache.EndRound();
  EXPECT_EQ(cache.stats().cache.entries, 1u);
  cache.EndRound();
  EXPECT_EQ(cache.stats().cache.entries, 0u) << "unused for max_age_rounds";
}

TEST(ElfImageCache, ErrorsNameThePathAndAreNotCached) {
  TempDir dir;
  std::string text = dir.File("not-elf.so");
  pyperf_test::RunCommand({"sh", "-c", "echo 'just some text, not an ELF header' > " + text});
  ElfImageCache cache;
  auto image = cache.GetPath(text);
  ASSERT_FALSE(image.ok());
  EXPECT_NE(image.error().find(text), std::string::npos) << image.error();
  EXPECT_NE(image.error().find("not an ELF file"), std::string::npos) << image.error();
  EXPECT_EQ(cache.stats().cache.entries, 0u);
  EXPECT_EQ(cache.stats().parses, 0u);
}

}  // namespace
}  // namespace ebpf
