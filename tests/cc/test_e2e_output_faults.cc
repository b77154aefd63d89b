// End-to-end tests of the output protocol when the file system fails PyPerf
// (issue 11, hardening): the output directory removed, a full file system
// (ENOSPC partway through a dump), no inode left for a fresh PATH, and a
// SIGUSR2 storm ended by a SIGTERM while PyPerf is dumping.
//
// What a user (gProfiler) must see in every case: a file under a name it
// reads (PATH.<stamp>) is complete, and has its dump line on stderr; a failed
// dump is one error line and PyPerf runs on; the samples of a failed dump are
// in the next one that succeeds, so none is lost or written twice.
//
// The workload (workloads/output_faults.py) is busy at the bottom of about a
// hundred frames with long names: each collapsed line is over 15 KB, so one
// sample makes a dump bigger than the little room a nearly full file system
// has left. It moves to its next phase (phase_N) on SIGUSR1, so a test can
// tell which stretch of time a delivered sample comes from.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support/collapsed.h"
#include "support/e2e.h"
#include "support/test_support.h"

namespace pyperf_test {
namespace {

constexpr auto kStartTimeout = seconds(60);    // BPF load on a busy machine
constexpr auto kDumpTimeout = seconds(20);     // a dump line after SIGUSR2, however busy
constexpr auto kExitTimeout = seconds(20);     // the final dump after SIGTERM
constexpr auto kPhaseCpu = milliseconds(100);  // workload CPU per phase: ~20 samples at -F 199
constexpr char kFailedDump[] = "PyPerf: error: dump failed: ";

// One "samples collected: N, ..., output: FILE" line PyPerf prints per dump.
struct DumpReport {
  uint64_t samples = 0;
  std::string output;
};

// (Parsed by hand: a storm makes thousands of them, too many for std::regex.)
std::vector<DumpReport> DumpReports(const std::string& stderr_text) {
  const std::string start = "PyPerf: samples collected: ", output = ", output: ";
  std::vector<DumpReport> reports;
  for (const auto& line : SplitLines(stderr_text)) {
    if (line.rfind(start, 0) != 0) continue;
    size_t at = line.find(output);
    if (at == std::string::npos) continue;
    DumpReport report;
    report.samples = std::strtoull(line.c_str() + start.size(), nullptr, 10);
    // Other counters (the native cache's) may follow the file, after a comma.
    size_t end = line.find(',', at + output.size());
    report.output =
        line.substr(at + output.size(), end == std::string::npos ? end : end - at - output.size());
    reports.push_back(std::move(report));
  }
  return reports;
}

std::vector<std::string> LinesStartingWith(const std::string& text, const std::string& prefix) {
  std::vector<std::string> lines;
  for (const auto& line : SplitLines(text))
    if (line.rfind(prefix, 0) == 0) lines.push_back(line);
  return lines;
}

std::vector<std::string> FailedDumpLines(const ChildProcess& pyperf) {
  return LinesStartingWith(pyperf.Stderr(), kFailedDump);
}

// The samples a failed dump's line says it kept ("its N samples are kept").
std::optional<uint64_t> KeptSamples(const std::string& line) {
  static const std::regex kept("; its (\\d+) samples are kept for the next dump$");
  std::smatch m;
  if (!std::regex_search(line, m, kept)) return std::nullopt;
  return std::stoull(m[1].str());
}

// A delivered file is complete: every line is one gProfiler reads
// (ParseCollapsed fails the test otherwise), the last one ends with a
// newline, and its counts add up to what its dump line reported. A file cut
// anywhere fails one of these: mid-line, the line or its count is wrong or
// the newline is missing; at a line's end, the sum is short.
CollapsedProfile ExpectComplete(const std::string& file, const DumpReport& report) {
  SCOPED_TRACE("dumped file " + file);
  EXPECT_EQ(report.output, file) << "the file its dump line names";
  std::string text = ReadFile(file);
  EXPECT_TRUE(text.empty() || text.back() == '\n')
      << "the last line is cut: ..." << text.substr(text.size() > 80 ? text.size() - 80 : 0);
  CollapsedProfile profile = ParseCollapsed(text);
  EXPECT_EQ(profile.TotalSamples(), report.samples) << "the counts in the file vs. its dump line";
  return profile;
}

bool HasPhase(const CollapsedProfile& profile, int phase) {
  const std::string function = "phase_" + std::to_string(phase);
  for (const auto& line : profile.lines)
    for (const auto& frame : line.frames)
      if (IsPythonFunction(frame, function, "")) return true;
  return false;
}

// Removes `dir` and the files in it.
void RemoveDirectory(const std::string& dir) {
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") unlink((dir + "/" + name).c_str());
    }
    closedir(d);
  }
  ASSERT_EQ(rmdir(dir.c_str()), 0) << dir << ": " << strerror(errno);
}

// A tmpfs mounted on a directory, unmounted when this goes (even when the test
// fails, and even if a file on it is still open: a lazy unmount then).
class TmpfsMount {
 public:
  TmpfsMount(std::string dir, const std::string& options) : dir_(std::move(dir)) {
    if (mkdir(dir_.c_str(), 0755) != 0) {
      error_ = "mkdir " + dir_ + ": " + strerror(errno);
    } else if (mount("tmpfs", dir_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, options.c_str()) != 0) {
      error_ = "mount -t tmpfs -o " + options + " " + dir_ + ": " + strerror(errno);
    } else {
      mounted_ = true;
    }
  }
  ~TmpfsMount() {
    if (mounted_ && umount2(dir_.c_str(), 0) != 0) umount2(dir_.c_str(), MNT_DETACH);
  }
  TmpfsMount(const TmpfsMount&) = delete;
  TmpfsMount& operator=(const TmpfsMount&) = delete;

  const std::string& dir() const { return dir_; }
  // Why it is not mounted; empty once it is.
  const std::string& error() const { return error_; }

 private:
  std::string dir_;
  bool mounted_ = false;
  std::string error_;
};

// Fills the file system `filler` is on, then frees two pages: a dump's first
// 8 KiB fit, the rest of its first line (over 15 KB) does not.
void FillLeavingTwoPages(const std::string& filler) {
  int fd = open(filler.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << filler << ": " << strerror(errno);
  std::string chunk(64 * 1024, 'x');
  off_t size = 0;
  ssize_t n;
  while ((n = write(fd, chunk.data(), chunk.size())) > 0) size += n;
  int err = errno;
  EXPECT_EQ(err, ENOSPC) << strerror(err);
  EXPECT_GT(size, 8192);
  EXPECT_EQ(ftruncate(fd, size - 8192), 0) << strerror(errno);
  close(fd);
}

// The file descriptor `fd` of process `pid` is open on `path`.
bool FdIsOpenOn(pid_t pid, uint64_t fd, const std::string& path) {
  std::string link = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  char target[4096];
  ssize_t n = readlink(link.c_str(), target, sizeof(target));
  return n > 0 && std::string(target, static_cast<size_t>(n)) == path;
}

// Sends SIGTERM to PyPerf (a child of this process) in the middle of a dump:
// traced, it is stopped as it enters its next write() into PATH, which only a
// dump with samples makes, and gets the SIGTERM there, the dump half-written;
// then it is let go. Signals that reach it meanwhile (the storm's SIGUSR2) are
// passed on. Returns "" once the SIGTERM is sent so, else what went wrong (and
// the SIGTERM is sent anyway, unless PyPerf ended).
std::string SigtermInTheMiddleOfADump(pid_t pid, const std::string& path,
                                      std::chrono::steady_clock::time_point deadline) {
  if (ptrace(PTRACE_SEIZE, pid, nullptr, PTRACE_O_TRACESYSGOOD) != 0) {
    std::string problem = std::string("PTRACE_SEIZE: ") + strerror(errno);
    kill(pid, SIGTERM);
    return problem;
  }
  ptrace(PTRACE_INTERRUPT, pid, nullptr, nullptr);
  constexpr int kSyscallStop = SIGTRAP | 0x80;  // PTRACE_O_TRACESYSGOOD
  std::string problem = "no dump was written into " + path + " in time";
  while (true) {
    int status = 0;
    if (waitpid(pid, &status, __WALL) != pid) return std::string("waitpid: ") + strerror(errno);
    if (WIFEXITED(status) || WIFSIGNALED(status)) return "PyPerf ended while traced";
    if (!WIFSTOPPED(status)) continue;
    const int sig = WSTOPSIG(status);
    if (sig == kSyscallStop) {
      __ptrace_syscall_info info = {};
      if (ptrace(PTRACE_GET_SYSCALL_INFO, pid, reinterpret_cast<void*>(sizeof(info)), &info) > 0 &&
          info.op == PTRACE_SYSCALL_INFO_ENTRY && info.entry.nr == SYS_write &&
          FdIsOpenOn(pid, info.entry.args[0], path)) {
        problem.clear();
        break;
      }
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    // On to the next system call, delivering the signal that stopped it if
    // one did (not at a system call, nor at PTRACE_INTERRUPT's stop).
    const bool signal_stop = sig != kSyscallStop && (status >> 16) != PTRACE_EVENT_STOP;
    ptrace(PTRACE_SYSCALL, pid, nullptr, reinterpret_cast<void*>(signal_stop ? sig : 0));
  }
  // Pending while PyPerf is stopped here; its handler runs once it is let go.
  kill(pid, SIGTERM);
  ptrace(PTRACE_DETACH, pid, nullptr, nullptr);
  return problem;
}

class OutputFaultsTest : public PythonWorkloadTest {
 protected:
  OutputFaultsTest() : PythonWorkloadTest("output_faults.py") {}

  // Mounts a tmpfs with `options` for the rest of the test (tmpfs_); why it
  // could not, if it could not.
  std::optional<std::string> MountTmpfs(const std::string& options) {
    tmpfs_parent_.emplace();
    tmpfs_.emplace(tmpfs_parent_->File("mnt"), options);
    if (!tmpfs_->error().empty()) return tmpfs_->error();
    return std::nullopt;
  }

  // PyPerf on the workload alone, writing to `path`, once it is sampling.
  void StartProfiling(const std::string& path) {
    path_ = path;
    pyperf_ = StartPyPerf({"-F", "199", "-p", std::to_string(workload_->pid()), "-o", path});
    ASSERT_TRUE(WaitForStderr(*pyperf_, "Ready to profile", kStartTimeout)) << "stderr:\n"
                                                                            << pyperf_->Stderr();
  }

  // Lets the workload run for kPhaseCpu in its phase: samples of it are taken.
  void RunInThisPhase() {
    ASSERT_TRUE(WaitForCpu(workload_->pid(), kPhaseCpu)) << "the workload did not run";
  }

  // Moves the workload to `phase` and lets it run there.
  void RunPhase(int phase) {
    workload_->Signal(SIGUSR1);
    const std::string line = "phase " + std::to_string(phase) + "\n";
    ASSERT_TRUE(
        WaitFor([&] { return workload_->Stdout().find(line) != std::string::npos; }, seconds(30)))
        << "the workload did not reach phase " << phase;
    RunInThisPhase();
  }

  // A SIGUSR2 that must succeed: its dump line, and the file, complete.
  CollapsedProfile DumpOk(std::string* file = nullptr) {
    const size_t before = DumpReports(pyperf_->Stderr()).size();
    pyperf_->Signal(SIGUSR2);
    EXPECT_TRUE(
        WaitFor([&] { return DumpReports(pyperf_->Stderr()).size() > before; }, kDumpTimeout))
        << "no dump line within " << kDumpTimeout.count() << " s of SIGUSR2; stderr:\n"
        << pyperf_->Stderr();
    auto reports = DumpReports(pyperf_->Stderr());
    if (reports.size() != before + 1) {
      ADD_FAILURE() << "not one dump line for one SIGUSR2; stderr:\n" << pyperf_->Stderr();
      return {};
    }
    if (file) *file = reports.back().output;
    return ExpectComplete(reports.back().output, reports.back());
  }

  // A SIGUSR2 that must fail: exactly one more error line, no dump line, no
  // new PATH.<stamp> file, and PyPerf still running. Returns the line.
  std::string DumpFails(const std::string& reason) {
    const size_t errors = FailedDumpLines(*pyperf_).size();
    const size_t reports = DumpReports(pyperf_->Stderr()).size();
    const auto files = DumpedFiles(path_);
    pyperf_->Signal(SIGUSR2);
    EXPECT_TRUE(WaitFor([&] { return FailedDumpLines(*pyperf_).size() > errors; }, kDumpTimeout))
        << "no \"" << kFailedDump << "\" line within " << kDumpTimeout.count()
        << " s of SIGUSR2; stderr:\n"
        << pyperf_->Stderr();
    auto lines = FailedDumpLines(*pyperf_);
    EXPECT_EQ(lines.size(), errors + 1) << "stderr:\n" << pyperf_->Stderr();
    EXPECT_EQ(DumpReports(pyperf_->Stderr()).size(), reports) << "stderr:\n" << pyperf_->Stderr();
    EXPECT_EQ(DumpedFiles(path_), files) << "a failed dump delivered a file";
    EXPECT_TRUE(pyperf_->Running()) << "PyPerf exited; stderr:\n" << pyperf_->Stderr();
    if (lines.size() <= errors) return "";
    const std::string& line = lines[errors];
    EXPECT_NE(line.find(path_), std::string::npos) << "does not name the file: " << line;
    EXPECT_NE(line.find(reason), std::string::npos)
        << "does not say \"" << reason << "\": " << line;
    EXPECT_TRUE(KeptSamples(line).has_value()) << "does not say the samples are kept: " << line;
    return line;
  }

  // SIGTERM: exits 0 leaving a complete final file and no PATH.
  // Phases 1 to 3, each ending in a dump that fails with `reason`, each
  // keeping more samples than the one before: the last count in *kept.
  void FailThreePhases(const std::string& what, const std::string& reason, uint64_t* kept) {
    for (int phase = 1; phase <= 3; ++phase) {
      SCOPED_TRACE("phase " + std::to_string(phase) + ", " + what);
      ASSERT_NO_FATAL_FAILURE(RunPhase(phase));
      std::string line = DumpFails(reason);
      ASSERT_FALSE(HasFailure()) << "stderr:\n" << pyperf_->Stderr();
      EXPECT_GT(KeptSamples(line).value_or(0), *kept) << "kept fewer samples than before: " << line;
      *kept = KeptSamples(line).value_or(0);
    }
  }

  // Once the fault is gone: phase 4, then a dump that holds a sample of every
  // phase since the last good dump (`before`), at least the `kept` samples,
  // and sorts after `before`; it is the only PATH.<stamp> file; a clean exit.
  void ExpectRecovery(uint64_t kept, const std::string& before) {
    ASSERT_NO_FATAL_FAILURE(RunPhase(4));
    std::string recovered;
    CollapsedProfile profile = DumpOk(&recovered);
    for (int phase = 1; phase <= 4; ++phase)
      EXPECT_TRUE(HasPhase(profile, phase))
          << "no sample of phase " << phase << " in " << recovered;
    EXPECT_GE(profile.TotalSamples(), kept) << "fewer samples than the failed dumps kept";
    EXPECT_GT(recovered, before) << "does not sort after the last dump before the fault";
    EXPECT_EQ(DumpedFiles(path_), std::vector<std::string>{recovered});
    ExpectCleanExit();
  }

  // PyPerf, sent SIGTERM, exits `code` within kExitTimeout.
  void ExpectExit(int code) {
    auto status = pyperf_->Wait(kExitTimeout);
    ASSERT_TRUE(status.has_value())
        << "still running " << kExitTimeout.count() << " s after SIGTERM";
    EXPECT_EQ(*status, code) << "stderr:\n" << pyperf_->Stderr();
  }

  void ExpectCleanExit() {
    const size_t before = DumpReports(pyperf_->Stderr()).size();
    pyperf_->Signal(SIGTERM);
    ASSERT_NO_FATAL_FAILURE(ExpectExit(0));
    auto reports = DumpReports(pyperf_->Stderr());
    ASSERT_EQ(reports.size(), before + 1) << "stderr:\n" << pyperf_->Stderr();
    ExpectComplete(reports.back().output, reports.back());
    EXPECT_FALSE(FileExists(path_)) << "the final dump left the transient file behind";
  }

  std::string path_;
  std::unique_ptr<ChildProcess> pyperf_;
  // Declared after pyperf_, so unmounted before PyPerf is stopped, as a
  // tmpfs local to the test body was.
  std::optional<TempDir> tmpfs_parent_;
  std::optional<TmpfsMount> tmpfs_;
};

// The directory is removed under a running PyPerf: each SIGUSR2 is one error
// line; once the directory is back, the next dump delivers every sample of
// the failed intervals, stamped with the start of the first of them.
TEST_F(OutputFaultsTest, RemovedDirectoryFailsEachDumpUntilItIsBack) {
  TempDir tmp;
  const std::string dir = tmp.File("out");
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  ASSERT_NO_FATAL_FAILURE(StartProfiling(dir + "/pyperf.col"));
  ASSERT_NO_FATAL_FAILURE(RunInThisPhase());
  std::string before_outage;
  EXPECT_TRUE(HasPhase(DumpOk(&before_outage), 0));

  ASSERT_NO_FATAL_FAILURE(RemoveDirectory(dir));
  const std::string stderr_before = pyperf_->Stderr();
  uint64_t kept = 0;
  ASSERT_NO_FATAL_FAILURE(
      FailThreePhases("the directory removed", "No such file or directory", &kept));
  // Nothing but the three error lines meanwhile.
  std::string during = pyperf_->Stderr().substr(stderr_before.size());
  EXPECT_EQ(SplitLines(during), FailedDumpLines(*pyperf_)) << "stderr meanwhile:\n" << during;

  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  ExpectRecovery(kept, before_outage);
}

// The file system fills: the dump gets ENOSPC after its first pages. Nothing
// appears under a PATH.<stamp> name, each failed dump is one error line, and
// once space is back the next dump holds every sample.
TEST_F(OutputFaultsTest, FullFileSystemFailsEachDumpUntilThereIsRoom) {
  if (auto why = MountTmpfs("size=2m,mode=0755"))
    PYPERF_SKIP_OR_FAIL("cannot mount a tmpfs: " + *why);
  ASSERT_NO_FATAL_FAILURE(StartProfiling(tmpfs_->dir() + "/pyperf.col"));
  ASSERT_NO_FATAL_FAILURE(RunInThisPhase());
  std::string before_full;
  EXPECT_TRUE(HasPhase(DumpOk(&before_full), 0));
  ASSERT_EQ(unlink(before_full.c_str()), 0);  // as gProfiler does once it has read it

  const std::string filler = tmpfs_->dir() + "/filler";
  ASSERT_NO_FATAL_FAILURE(FillLeavingTwoPages(filler));

  uint64_t kept = 0;
  ASSERT_NO_FATAL_FAILURE(
      FailThreePhases("the file system full", "No space left on device", &kept));

  ASSERT_EQ(unlink(filler.c_str()), 0);
  ExpectRecovery(kept, before_full);
}

// The file system is full when SIGTERM comes: the last dump fails. PyPerf
// says so in one line and exits 1, leaving neither a PATH.<stamp> file nor
// PATH (which would tell a caller waiting for the next PyPerf on this PATH
// that it is ready).
TEST_F(OutputFaultsTest, FullFileSystemAtSigtermExitsOneLeavingNoFile) {
  if (auto why = MountTmpfs("size=2m,mode=0755"))
    PYPERF_SKIP_OR_FAIL("cannot mount a tmpfs: " + *why);
  ASSERT_NO_FATAL_FAILURE(StartProfiling(tmpfs_->dir() + "/pyperf.col"));
  ASSERT_NO_FATAL_FAILURE(FillLeavingTwoPages(tmpfs_->dir() + "/filler"));
  ASSERT_NO_FATAL_FAILURE(RunInThisPhase());

  pyperf_->Signal(SIGTERM);
  ASSERT_NO_FATAL_FAILURE(ExpectExit(1));
  auto errors = LinesStartingWith(pyperf_->Stderr(), "PyPerf: error: ");
  ASSERT_EQ(errors.size(), 1u) << "stderr:\n" << pyperf_->Stderr();
  EXPECT_TRUE(std::regex_match(
      errors[0], std::regex("PyPerf: error: final dump failed: cannot write .*: No "
                            "space left on device; its [1-9][0-9]* samples are lost")))
      << errors[0];
  EXPECT_EQ(DumpReports(pyperf_->Stderr()).size(), 0u) << "stderr:\n" << pyperf_->Stderr();
  EXPECT_EQ(DumpedFiles(path_), std::vector<std::string>{});
  EXPECT_FALSE(FileExists(path_)) << "the failed last dump left the transient file behind";
}

// No inode left: the dump itself renames PATH (no new inode needed) and is
// delivered, with its dump line, but no fresh PATH can be created for the
// next interval: a warning. The next dump then fails (one error line, the
// samples kept) until an inode is free again.
TEST_F(OutputFaultsTest, NoInodeForAFreshFileStillReportsTheDeliveredOne) {
  if (auto why = MountTmpfs("size=2m,nr_inodes=64,mode=0755"))
    PYPERF_SKIP_OR_FAIL("cannot mount a tmpfs: " + *why);
  ASSERT_NO_FATAL_FAILURE(StartProfiling(tmpfs_->dir() + "/pyperf.col"));

  // Every inode taken (the last files may fail for want of an inode, not room).
  std::vector<std::string> fillers;
  for (int i = 0;; ++i) {
    std::string name = tmpfs_->dir() + "/inode." + std::to_string(i);
    int fd = open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
      ASSERT_EQ(errno, ENOSPC) << strerror(errno);
      break;
    }
    close(fd);
    fillers.push_back(name);
    ASSERT_LT(i, 1000) << "nr_inodes=64 was not honoured";
  }

  ASSERT_NO_FATAL_FAILURE(RunPhase(1));
  std::string delivered;
  CollapsedProfile profile = DumpOk(&delivered);
  EXPECT_TRUE(HasPhase(profile, 1)) << delivered;
  auto warnings = LinesStartingWith(pyperf_->Stderr(), "PyPerf: warning: ");
  ASSERT_EQ(warnings.size(), 1u) << "stderr:\n" << pyperf_->Stderr();
  EXPECT_NE(warnings[0].find("cannot create output file " + path_ + ": No space left on device"),
            std::string::npos)
      << warnings[0];

  ASSERT_NO_FATAL_FAILURE(RunPhase(2));
  std::string line = DumpFails("No space left on device");
  ASSERT_FALSE(HasFailure()) << "stderr:\n" << pyperf_->Stderr();

  for (const auto& name : fillers) unlink(name.c_str());
  ASSERT_NO_FATAL_FAILURE(RunPhase(3));
  std::string recovered;
  profile = DumpOk(&recovered);
  EXPECT_TRUE(HasPhase(profile, 2)) << "the failed dump's samples are not in " << recovered;
  EXPECT_TRUE(HasPhase(profile, 3)) << recovered;
  EXPECT_GE(profile.TotalSamples(), KeptSamples(line).value_or(0));
  EXPECT_EQ(DumpedFiles(path_), (std::vector<std::string>{delivered, recovered}));
  ExpectCleanExit();
}

// SIGUSR2 as fast as a thread can send it, while sampling, and a SIGTERM
// that comes while PyPerf is in the middle of writing a dump: PyPerf
// completes that dump, makes its final one and exits 0; every PATH.<stamp>
// file is complete and has its dump line, every dump line its file; each
// file's counts are its line's, so their sums agree: no sample is in two
// files, and none is left out of the files beyond the `lost` counter (events
// never made into samples, in neither sum).
TEST_F(OutputFaultsTest, SigusrStormEndedBySigtermLeavesOnlyCompleteFiles) {
  constexpr int kStormSignals = 200;
  constexpr size_t kStormDumps = 10;
  TempDir tmp;
  ASSERT_NO_FATAL_FAILURE(StartProfiling(tmp.File("pyperf.col")));
  ASSERT_NO_FATAL_FAILURE(RunInThisPhase());

  // From here to the join, nothing may reap PyPerf (ChildProcess::Running and
  // Wait do): the storm signals its pid, which must stay PyPerf's.
  const pid_t pid = pyperf_->pid();
  std::atomic<bool> sigterm_sent{false};
  std::atomic<int> sent{0};
  std::thread storm([&] {
    // At least kStormSignals, and on until the SIGTERM is sent.
    while (sent < kStormSignals || !sigterm_sent) {
      if (kill(pid, SIGUSR2) != 0) break;
      ++sent;
      std::this_thread::yield();
    }
  });
  // Once the storm has brought a few dumps, the SIGTERM, amid it.
  const size_t before = DumpReports(pyperf_->Stderr()).size();
  WaitFor([&] { return DumpReports(pyperf_->Stderr()).size() >= before + kStormDumps; },
          seconds(10));
  const size_t at_sigterm_before = DumpReports(pyperf_->Stderr()).size();
  const std::string problem =
      SigtermInTheMiddleOfADump(pid, path_, std::chrono::steady_clock::now() + seconds(20));
  sigterm_sent = true;
  storm.join();
  EXPECT_GE(sent.load(), kStormSignals);
  ASSERT_EQ(problem, "") << "the SIGTERM did not come in the middle of a dump";

  ASSERT_NO_FATAL_FAILURE(ExpectExit(0));
  EXPECT_EQ(FailedDumpLines(*pyperf_), std::vector<std::string>{});
  EXPECT_FALSE(FileExists(path_)) << "the final dump left the transient file behind";

  auto reports = DumpReports(pyperf_->Stderr());
  auto files = DumpedFiles(path_);
  std::vector<std::string> reported;
  for (const auto& r : reports) reported.push_back(r.output);
  // Dump lines come in the order the files were made, and names sort by time.
  EXPECT_EQ(reported, files) << "the files on disk and those the dump lines name differ";
  // Traced, PyPerf made dumps until it was caught in one with samples; that
  // one was completed, then the final one made, and no other.
  ASSERT_GE(reports.size(), at_sigterm_before + 2) << "stderr:\n" << pyperf_->Stderr();
  EXPECT_GT(reports[reports.size() - 2].samples, 0u) << "the interrupted dump wrote no sample";
  std::printf("%d SIGUSR2 sent, %zu dumps (the last two: the one the SIGTERM came in, the final)\n",
              sent.load(), reports.size());

  uint64_t in_files = 0, on_lines = 0;
  bool workload_seen = false;
  for (const auto& report : reports) {
    if (!FileExists(report.output)) continue;  // reported above
    CollapsedProfile profile = ExpectComplete(report.output, report);
    in_files += profile.TotalSamples();
    on_lines += report.samples;
    workload_seen = workload_seen || HasPhase(profile, 0);
  }
  EXPECT_EQ(in_files, on_lines);
  EXPECT_GT(in_files, 0u);
  EXPECT_TRUE(workload_seen) << "no file has the workload's stack";
}

}  // namespace
}  // namespace pyperf_test
