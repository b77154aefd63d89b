// Tests for mapped_file: opening a process's mapped file from the host through
// /proc/PID/root (this process, another mount namespace), through
// /proc/PID/map_files (a deleted file, a path that now names another file),
// and what it says when nothing opens; on real child processes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <optional>
#include <string>

#include "mapped_file.h"
#include "proc_maps.h"
#include "support/test_support.h"

namespace ebpf {
namespace {

using pyperf_test::ChildProcess;
using pyperf_test::TempDir;

std::string ReadFd(int fd, size_t size) {
  std::string buf(size, '\0');
  ssize_t n = pread(fd, buf.data(), size, 0);
  buf.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return buf;
}

FileStamp StatPath(const std::string& path) {
  struct stat st;
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path << ": " << strerror(errno);
  return FileStamp::Of(st);
}

// The first mapping of `pid` whose path is `path`, waiting for the process to
// map it (a child exec'ing).
std::optional<MemoryMapping> WaitForMapping(pid_t pid, const std::string& path) {
  std::optional<MemoryMapping> found;
  pyperf_test::WaitFor(
      [&] {
        auto maps = ReadProcMaps(pid);
        if (!maps.ok()) return false;
        for (const auto& m : *maps) {
          if (m.path == path) {
            found = m;
            return true;
          }
        }
        return false;
      },
      std::chrono::seconds(10));
  return found;
}

// A copy of /bin/sleep in `dir`, run as a child with `sleep 100`; `mapping`
// is its first mapping of the copy, once it runs.
struct SleepingCopy {
  explicit SleepingCopy(const TempDir& dir)
      : path(dir.File("pyperf-sleep")),
        copied(pyperf_test::RunCommand({"cp", "/bin/sleep", path}).exit_code == 0),
        child({path, "100"}),
        mapping(WaitForMapping(child.pid(), path)) {}
  std::string path;
  bool copied;
  ChildProcess child;
  std::optional<MemoryMapping> mapping;
};

TEST(OpenRegularFile, GivesTheFilesStampAndRefusesWhatIsNotARegularFile) {
  TempDir dir;
  std::string path = dir.File("file");
  std::ofstream(path) << "some bytes";
  auto file = OpenRegularFile(path);
  ASSERT_TRUE(file.ok()) << file.error();
  EXPECT_EQ(file->path, path);
  EXPECT_EQ(file->stamp, StatPath(path));
  EXPECT_EQ(file->stamp.size, 10u);
  EXPECT_EQ(ReadFd(file->fd.get(), 100), "some bytes");

  auto directory = OpenRegularFile(dir.path());
  ASSERT_FALSE(directory.ok());
  EXPECT_NE(directory.error().find(dir.path()), std::string::npos) << directory.error();
  EXPECT_NE(directory.error().find("not a regular file"), std::string::npos) << directory.error();

  // A FIFO is refused at once, not waited on for a writer.
  std::string fifo = dir.File("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FALSE(OpenRegularFile(fifo).ok());

  auto missing = OpenRegularFile(dir.File("missing"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().find("No such file"), std::string::npos) << missing.error();
}

TEST(OpenProcessMappedFile, OpensAMappedFileThroughTheProcessRoot) {
  TempDir dir;
  std::string path = dir.File("mapped file (1).bin");
  std::ofstream(path) << "pyperf mapped_file test content";
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  void* addr = mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  ASSERT_NE(addr, MAP_FAILED);
  auto maps = ReadProcMaps(getpid());
  ASSERT_TRUE(maps.ok()) << maps.error();
  const MemoryMapping* m = nullptr;
  for (const auto& candidate : *maps) {
    if (candidate.contains(reinterpret_cast<uint64_t>(addr))) m = &candidate;
  }
  ASSERT_NE(m, nullptr);

  auto file = OpenProcessMappedFile(MappedFileRequest::For(getpid(), *m));
  munmap(addr, 4096);
  ASSERT_TRUE(file.ok()) << file.error();
  EXPECT_EQ(file->path, "/proc/" + std::to_string(getpid()) + "/root" + path);
  EXPECT_EQ(file->stamp, StatPath(path));
  EXPECT_EQ(ReadFd(file->fd.get(), 100), "pyperf mapped_file test content");
}

// A package upgrade deletes the executable a process runs: its path names no
// file, and the mapped file is still read through map_files.
TEST(OpenProcessMappedFile, OpensADeletedExecutableOfAChildThroughMapFiles) {
  TempDir dir;
  SleepingCopy sleeping(dir);
  ASSERT_TRUE(sleeping.copied && sleeping.mapping) << "the child did not map " << sleeping.path;
  const MemoryMapping& before = *sleeping.mapping;
  const FileStamp original = StatPath(sleeping.path);
  ASSERT_EQ(unlink(sleeping.path.c_str()), 0);
  auto maps = ReadProcMaps(sleeping.child.pid());
  ASSERT_TRUE(maps.ok()) << maps.error();
  const MemoryMapping* m = nullptr;
  for (const auto& candidate : *maps) {
    if (candidate.path == sleeping.path && candidate.start == before.start) m = &candidate;
  }
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(m->deleted);

  auto file = OpenProcessMappedFile(MappedFileRequest::For(sleeping.child.pid(), *m));
  ASSERT_TRUE(file.ok()) << file.error();
  EXPECT_EQ(file->path, MapFilesPath(sleeping.child.pid(), m->start, m->end));
  EXPECT_EQ(file->stamp.ino, m->inode);
  EXPECT_EQ(file->stamp.size, original.size);
  EXPECT_EQ(file->stamp.mtime_ns, original.mtime_ns);
  EXPECT_EQ(ReadFd(file->fd.get(), 4), "\177ELF");
}

// maps was read, then the path was replaced by another file (not yet shown as
// deleted to us): the inode check passes over the path and takes map_files;
// only a caller that accepts another inode (overlayfs) gets the path's file.
TEST(OpenProcessMappedFile, PassesOverAPathThatNowNamesAnotherFile) {
  TempDir dir;
  SleepingCopy sleeping(dir);
  ASSERT_TRUE(sleeping.copied && sleeping.mapping) << "the child did not map " << sleeping.path;
  const MemoryMapping* m = &*sleeping.mapping;
  std::string other = dir.File("other");
  std::ofstream(other) << "not the mapped file";
  ASSERT_EQ(rename(other.c_str(), sleeping.path.c_str()), 0);

  MappedFileRequest request = MappedFileRequest::For(sleeping.child.pid(), *m);
  request.deleted = false;  // as maps said before the rename
  auto file = OpenProcessMappedFile(request);
  ASSERT_TRUE(file.ok()) << file.error();
  EXPECT_EQ(file->path, MapFilesPath(sleeping.child.pid(), m->start, m->end));
  EXPECT_EQ(file->stamp.ino, m->inode);
  EXPECT_EQ(ReadFd(file->fd.get(), 4), "\177ELF");

  // No path leads to the inode any more (a mapping that is not there has no
  // map_files entry): the strict caller gets an error naming the other inode,
  // the lenient one the file the path names now.
  request.start += 0x1000000;
  request.end += 0x1000000;
  auto strict = OpenProcessMappedFile(request);
  ASSERT_FALSE(strict.ok());
  EXPECT_NE(strict.error().find(sleeping.path), std::string::npos) << strict.error();
  EXPECT_NE(strict.error().find("not the mapped " + std::to_string(m->inode)), std::string::npos)
      << strict.error();
  request.accept_other_inode = true;
  auto lenient = OpenProcessMappedFile(request);
  ASSERT_TRUE(lenient.ok()) << lenient.error();
  EXPECT_EQ(lenient->path,
            "/proc/" + std::to_string(sleeping.child.pid()) + "/root" + sleeping.path);
  EXPECT_EQ(ReadFd(lenient->fd.get(), 100), "not the mapped file");
}

// A process in its own mount namespace runs a binary from a tmpfs that only
// that namespace can see; the host reaches it through /proc/PID/root.
TEST(OpenProcessMappedFile, ReachesAFileOnlyTheProcessMountNamespaceSees) {
  TempDir dir;
  std::string mountpoint = dir.File("private");
  ASSERT_EQ(mkdir(mountpoint.c_str(), 0755), 0);
  std::string binary = mountpoint + "/pyperf-ns-sleep";
  ChildProcess child({"unshare", "--mount", "--propagation", "private", "sh", "-c",
                      "mount -t tmpfs none '" + mountpoint + "' && cp /bin/sleep '" + binary +
                          "' && exec '" + binary + "' 100"});
  auto m = WaitForMapping(child.pid(), binary);
  if (!m) {
    PYPERF_SKIP_OR_FAIL("cannot run a process in a private mount namespace: " + child.Stderr());
  }
  EXPECT_FALSE(pyperf_test::FileExists(binary)) << "the host should not see the private tmpfs";

  auto file = OpenProcessMappedFile(MappedFileRequest::For(child.pid(), *m));
  ASSERT_TRUE(file.ok()) << file.error();
  EXPECT_EQ(file->path, "/proc/" + std::to_string(child.pid()) + "/root" + binary);
  EXPECT_EQ(file->stamp.ino, m->inode);
}

TEST(OpenProcessMappedFile, SaysWhichFileOfWhichPidCouldNotBeOpened) {
  MemoryMapping m;
  m.start = 0x400000;
  m.end = 0x401000;
  m.inode = 12345;
  m.path = "/usr/lib/libnothing.so";
  pid_t missing = 0x3fffffff;  // above any pid_max
  auto file = OpenProcessMappedFile(MappedFileRequest::For(missing, m));
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.error().find("/usr/lib/libnothing.so"), std::string::npos) << file.error();
  EXPECT_NE(file.error().find(std::to_string(missing)), std::string::npos) << file.error();
  EXPECT_NE(file.error().find("No such file"), std::string::npos) << file.error();
}

TEST(PathInProcess, StripsTheChrootDirectoryOnly) {
  EXPECT_EQ(PathInProcess("/srv/root/usr/bin/python3", "/srv/root"), "/usr/bin/python3");
  EXPECT_EQ(PathInProcess("/usr/bin/python3", "/"), "/usr/bin/python3");
  // Another directory that merely starts the same way, and a container's
  // path that maps already shows as the process sees it.
  EXPECT_EQ(PathInProcess("/srv/rootfs/bin/x", "/srv/root"), "/srv/rootfs/bin/x");
  EXPECT_EQ(PathInProcess("/usr/lib/libc.so.6", "/srv/root"), "/usr/lib/libc.so.6");
  EXPECT_EQ(ProcessRootDirectory(getpid()), "/");
  EXPECT_EQ(ProcessRootDirectory(0x3fffffff), "/");
}

}  // namespace
}  // namespace ebpf
