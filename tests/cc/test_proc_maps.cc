// Tests for proc_maps: parsing /proc/PID/maps (deleted files among them),
// start times and the pid list, on this process and real child processes.
// Opening the mapped files is test_mapped_file.cc's.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstring>
#include <fstream>

#include "proc_maps.h"
#include "support/test_support.h"

namespace ebpf {
namespace {

using pyperf_test::ChildProcess;
using pyperf_test::TempDir;

const MemoryMapping* FindContaining(const std::vector<MemoryMapping>& maps, uint64_t addr) {
  for (const auto& m : maps) {
    if (m.contains(addr)) return &m;
  }
  return nullptr;
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
}

// A file mapped into this process for the duration of a test.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    size_ = static_cast<size_t>(lseek(fd_, 0, SEEK_END));
    addr_ = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
  }
  ~MappedFile() {
    if (addr_ != MAP_FAILED) munmap(addr_, size_);
    close(fd_);
  }
  bool ok() const { return addr_ != MAP_FAILED; }
  uint64_t address() const { return reinterpret_cast<uint64_t>(addr_); }

 private:
  int fd_ = -1;
  size_t size_ = 0;
  void* addr_ = MAP_FAILED;
};

TEST(ParseProcMaps, ParsesEveryKindOfLine) {
  const char* text =
      "00400000-00421000 r--p 00000000 fe:00 1234                               "
      "/usr/bin/python3.11\n"
      "7f0000000000-7f0000001000 rw-p 0001f000 103:0a 99 /tmp/dir with spaces/lib (x).so\n"
      "7f0000002000-7f0000003000 r-xp 00002000 08:01 77     /tmp/gone.so (deleted)\n"
      "7f0000004000-7f0000005000 rw-p 00000000 00:00 0 \n"
      "7f0000006000-7f0000007000 rw-p 00000000 00:00 0                          [heap]\n"
      "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n";
  auto maps = ParseProcMaps(text);
  ASSERT_TRUE(maps.ok()) << maps.error();
  ASSERT_EQ(maps->size(), 6u);

  const MemoryMapping& exe = (*maps)[0];
  EXPECT_EQ(exe.start, 0x400000u);
  EXPECT_EQ(exe.end, 0x421000u);
  EXPECT_EQ(exe.perms, "r--p");
  EXPECT_EQ(exe.offset, 0u);
  EXPECT_EQ(exe.dev_major, 0xfeu);
  EXPECT_EQ(exe.dev_minor, 0u);
  EXPECT_EQ(exe.inode, 1234u);
  EXPECT_EQ(exe.path, "/usr/bin/python3.11");
  EXPECT_FALSE(exe.deleted);
  EXPECT_TRUE(exe.is_file());
  EXPECT_FALSE(exe.writable());

  const MemoryMapping& spaced = (*maps)[1];
  EXPECT_EQ(spaced.offset, 0x1f000u);
  EXPECT_EQ(spaced.dev_major, 0x103u);
  EXPECT_EQ(spaced.dev_minor, 0xau);
  EXPECT_EQ(spaced.path, "/tmp/dir with spaces/lib (x).so");
  EXPECT_TRUE(spaced.writable());

  const MemoryMapping& gone = (*maps)[2];
  EXPECT_EQ(gone.path, "/tmp/gone.so");
  EXPECT_TRUE(gone.deleted);
  EXPECT_TRUE(gone.executable());

  EXPECT_EQ((*maps)[3].path, "");
  EXPECT_FALSE((*maps)[3].is_file());
  EXPECT_EQ((*maps)[4].path, "[heap]");
  EXPECT_FALSE((*maps)[4].is_file());
  EXPECT_EQ((*maps)[5].start, 0xffffffffff600000u);
}

TEST(ParseProcMaps, RejectsMalformedLineNamingIt) {
  auto maps = ParseProcMaps("00400000-00421000 r--p 00000000 fe:00 1 /bin/ok\nnot a maps line\n");
  ASSERT_FALSE(maps.ok());
  EXPECT_NE(maps.error().find("not a maps line"), std::string::npos) << maps.error();
}

TEST(ReadProcMaps, FindsOwnExecutableCode) {
  auto maps = ReadProcMaps(getpid());
  ASSERT_TRUE(maps.ok()) << maps.error();
  auto exe = ReadProcessExePath(getpid());
  ASSERT_TRUE(exe.ok()) << exe.error();

  // The code of this very function lies in an executable mapping of our binary.
  const MemoryMapping* code = FindContaining(*maps, reinterpret_cast<uint64_t>(&FindContaining));
  ASSERT_NE(code, nullptr);
  EXPECT_TRUE(code->executable());
  EXPECT_EQ(code->path, *exe);
  EXPECT_TRUE(std::is_sorted(maps->begin(), maps->end(),
                             [](const auto& a, const auto& b) { return a.start < b.start; }));
}

TEST(ReadProcMaps, ReportsFileWithSpacesThenItsDeletion) {
  TempDir dir;
  std::string path = dir.File("mapped file (1).bin");
  const std::string content = "pyperf proc_maps test content";
  WriteFile(path, content);
  MappedFile mapped(path);
  ASSERT_TRUE(mapped.ok());

  auto maps = ReadProcMaps(getpid());
  ASSERT_TRUE(maps.ok()) << maps.error();
  const MemoryMapping* m = FindContaining(*maps, mapped.address());
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->path, path);
  EXPECT_FALSE(m->deleted);
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(m->inode, st.st_ino);
  // Its map_files entry, named as the kernel names it (lower-case hex, no
  // padding), links to it.
  char target[4096];
  ssize_t n = readlink(MapFilesPath(getpid(), m->start, m->end).c_str(), target, sizeof(target));
  ASSERT_GT(n, 0) << strerror(errno);
  EXPECT_EQ(std::string(target, static_cast<size_t>(n)), path);
  EXPECT_EQ(MapFilesPath(42, 0x7f00a000, 0x7f00b000), "/proc/42/map_files/7f00a000-7f00b000");

  ASSERT_EQ(unlink(path.c_str()), 0);
  maps = ReadProcMaps(getpid());
  ASSERT_TRUE(maps.ok()) << maps.error();
  m = FindContaining(*maps, mapped.address());
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(m->deleted);
  EXPECT_EQ(m->path, path);  // without " (deleted)"
  EXPECT_EQ(m->inode, st.st_ino);
}

TEST(ReadProcMaps, FailsForMissingProcessNamingIt) {
  pid_t missing = 0x3fffffff;  // above any pid_max
  auto maps = ReadProcMaps(missing);
  ASSERT_FALSE(maps.ok());
  EXPECT_NE(maps.error().find(std::to_string(missing)), std::string::npos) << maps.error();
  EXPECT_FALSE(ReadProcessStartTime(missing).ok());
  EXPECT_FALSE(ReadProcessExePath(missing).ok());
}

TEST(ReadProcessStartTime, IsStableAndOrdersProcesses) {
  auto self1 = ReadProcessStartTime(getpid());
  auto self2 = ReadProcessStartTime(getpid());
  ASSERT_TRUE(self1.ok()) << self1.error();
  ASSERT_TRUE(self2.ok());
  EXPECT_EQ(*self1, *self2);
  EXPECT_GT(*self1, 0u);

  // A command name with spaces and parentheses must not shift the fields.
  TempDir dir;
  std::string odd = dir.File("odd) (name x");
  ASSERT_EQ(symlink("/bin/sleep", odd.c_str()), 0);
  ChildProcess child({odd, "100"});
  ASSERT_TRUE(pyperf_test::WaitFor(
      [&] {
        return pyperf_test::ReadFile("/proc/" + std::to_string(child.pid()) + "/comm")
                   .find("odd)") != std::string::npos;
      },
      std::chrono::seconds(10)));
  auto child_start = ReadProcessStartTime(child.pid());
  ASSERT_TRUE(child_start.ok()) << child_start.error();
  EXPECT_GE(*child_start, *self1);
  // Clock ticks since boot: no later than now.
  std::string uptime = pyperf_test::ReadFile("/proc/uptime");
  double now_ticks = std::stod(uptime) * static_cast<double>(sysconf(_SC_CLK_TCK));
  EXPECT_LE(static_cast<double>(*child_start), now_ticks + 1);
}

TEST(ParseProcessIdentity, KeepsStartTimeAndLayoutWhateverTheCommandName) {
  // A real line of /proc/PID/stat (52 fields) whose command name holds ") (".
  const char* line =
      "4242 (odd) (name x) S 1 4242 4242 0 -1 4194560 120 0 0 0 1 2 0 0 20 0 1 0 987654 "
      "5685248 230 18446744073709551615 94111 94999 140720 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 "
      "95000 95500 96000 140721 140722 140723 140724 0\n";
  auto id = ParseProcessIdentity(line);
  ASSERT_TRUE(id.ok()) << id.error();
  EXPECT_EQ(id->start_time, 987654u);
  EXPECT_EQ(id->layout, (std::array<uint64_t, 5>{94111, 94999, 140720, 95000, 96000}));

  EXPECT_FALSE(ParseProcessIdentity("4242 (short) S 1 2 3\n").ok());
  EXPECT_FALSE(ParseProcessIdentity("no parenthesis at all").ok());

  // This process: the same start time as ReadProcessStartTime, a layout that
  // holds this very function.
  auto self = ReadProcessIdentity(getpid());
  ASSERT_TRUE(self.ok()) << self.error();
  EXPECT_EQ(self->start_time, ReadProcessStartTime(getpid()).value());
  auto code = reinterpret_cast<uint64_t>(&ParseProcessIdentity);
  EXPECT_NE(self->layout[0], 0u);
  EXPECT_LE(self->layout[0], code);
  EXPECT_LT(code, self->layout[1]);
}

TEST(ListProcesses, IncludesSelfInitAndChild) {
  ChildProcess child({"sleep", "100"});
  std::vector<pid_t> pids = ListProcesses();
  EXPECT_TRUE(std::is_sorted(pids.begin(), pids.end()));
  EXPECT_TRUE(std::binary_search(pids.begin(), pids.end(), getpid()));
  EXPECT_TRUE(std::binary_search(pids.begin(), pids.end(), 1));
  EXPECT_TRUE(std::binary_search(pids.begin(), pids.end(), child.pid()));
}

}  // namespace
}  // namespace ebpf
