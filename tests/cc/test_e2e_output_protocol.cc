// End-to-end tests of what gProfiler's PythonEbpfProfiler relies on (issue 3):
// the output protocol of the built PyPerf (transient PATH, SIGUSR2 rotation to
// PATH.<YYYYmmddHHMMSScc>, final dumps at -d, SIGINT and SIGTERM, stdout
// without -o, one line of counters per dump), that a stderr nobody reads
// never delays a dump (issue 10), the warnings about -p pids that cannot be
// profiled, and its command-line errors as a user sees them. Also checks the
// collapsed-output reader the e2e tests use.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "support/collapsed.h"
#include "support/e2e.h"
#include "support/test_support.h"
#include "unique_fd.h"

namespace pyperf_test {
namespace {

using Clock = std::chrono::system_clock;

constexpr auto kGProfilerFileTimeout = seconds(10);  // gProfiler waits this long for PATH
constexpr auto kGProfilerDumpTimeout = seconds(5);   // and this long for a dump

// One "samples collected: N, ..., output: FILE" line PyPerf prints per dump.
struct DumpReport {
  uint64_t samples = 0;
  std::string output;
};

std::vector<DumpReport> DumpReports(const std::string& stderr_text) {
  // Other counters may follow "output: FILE", after a comma.
  static const std::regex report("samples collected: (\\d+),.*output: ([^,]+)");
  std::vector<DumpReport> reports;
  for (const auto& line : SplitLines(stderr_text)) {
    std::smatch m;
    if (std::regex_search(line, m, report))
      reports.push_back({std::stoull(m[1].str()), m[2].str()});
  }
  return reports;
}

// Centiseconds since the epoch named by a dumped file's suffix (UTC), or -1.
int64_t StampCentis(const std::string& file, const std::string& path) {
  std::string stamp = file.substr(path.size() + 1);
  if (!std::regex_match(stamp, std::regex("\\d{16}"))) return -1;
  struct tm tm = {};
  if (!strptime(stamp.substr(0, 14).c_str(), "%Y%m%d%H%M%S", &tm)) return -1;
  return static_cast<int64_t>(timegm(&tm)) * 100 + std::stoi(stamp.substr(14));
}

int64_t Centis(Clock::time_point t) {
  return std::chrono::duration_cast<milliseconds>(t.time_since_epoch()).count() / 10;
}

// Checks a delivered file: its name, that every line parses (ParseCollapsed), that its counts
// add up to what PyPerf reported, and that it holds the workload's stacks.
void ExpectDelivered(const std::string& file, const std::string& path, const DumpReport& report,
                     pid_t workload) {
  SCOPED_TRACE("dumped file " + file);
  EXPECT_TRUE(std::regex_match(
      file, std::regex(std::regex_replace(path, std::regex("[.^$|()\\[\\]{}*+?\\\\]"), "\\$&") +
                       "\\.\\d{16}")))
      << "not PATH.<YYYYmmddHHMMSScc>";
  EXPECT_EQ(report.output, file) << "the file the stderr line names";
  CollapsedProfile profile = ParseCollapsed(ReadFile(file));
  EXPECT_EQ(profile.TotalSamples(), report.samples) << "the counts in the file vs. stderr";
  EXPECT_GT(report.samples, 0u);
  bool has_main_busy = false;
  for (const auto& line : profile.OfPid(workload)) {
    for (const auto& frame : line.frames)
      if (IsPythonFunction(frame, "main_busy", "")) has_main_busy = true;
  }
  EXPECT_TRUE(has_main_busy) << "no stack of the workload (pid " << workload << ") with main_busy";
}

class OutputProtocolTest : public PythonWorkloadTest {
 protected:
  OutputProtocolTest() : PythonWorkloadTest("calltree.py") {}

  std::vector<std::string> Args(std::vector<std::string> extra) const {
    std::vector<std::string> args = {"-F", "199", "-p", std::to_string(workload_->pid())};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  // Waits until the workload has used another `cpu` of CPU time: samples
  // to dump, however busy the machine is.
  void WaitForWorkloadCpu(milliseconds cpu) {
    ASSERT_TRUE(WaitForCpu(workload_->pid(), cpu)) << "the workload did not run";
  }

  // Ends a PyPerf with `sig` (once it is ready and the workload has run for
  // a CPU second) and checks it exits 0 leaving exactly one dumped file with
  // the samples.
  void ExpectFinalDumpOnSignal(int sig) {
    auto pyperf = StartPyPerf(Args({"-o", path_}));
    ASSERT_TRUE(WaitForStderr(*pyperf, "Ready to profile", kPyPerfTimeout)) << "stderr:\n"
                                                                            << pyperf->Stderr();
    WaitForWorkloadCpu(seconds(1));
    pyperf->Signal(sig);
    auto status = pyperf->Wait(kGProfilerDumpTimeout);
    ASSERT_TRUE(status.has_value())
        << "still running " << kGProfilerDumpTimeout.count() << " s after signal " << sig;
    EXPECT_EQ(*status, 0) << "stderr:\n" << pyperf->Stderr();
    auto files = DumpedFiles(path_);
    auto reports = DumpReports(pyperf->Stderr());
    ASSERT_EQ(files.size(), 1u) << "stderr:\n" << pyperf->Stderr();
    ASSERT_EQ(reports.size(), 1u) << "stderr:\n" << pyperf->Stderr();
    ExpectDelivered(files[0], path_, reports[0], workload_->pid());
  }

  TempDir dir_;
  const std::string path_ = dir_.File("pyperf.col");
};

// gProfiler's loop: wait for PATH, then SIGUSR2 every interval and read the
// newest PATH.*; at the end SIGTERM.
TEST_F(OutputProtocolTest, RotatesOnSigusr2AndDumpsOnSigterm) {
  Clock::time_point launched = Clock::now();
  auto pyperf = StartPyPerf(Args({"-o", path_}));
  ASSERT_TRUE(
      WaitFor([&] { return FileExists(path_) || !pyperf->Running(); }, kGProfilerFileTimeout) &&
      FileExists(path_))
      << path_ << " did not appear within " << kGProfilerFileTimeout.count() << " s; stderr:\n"
      << pyperf->Stderr();
  ASSERT_TRUE(WaitForStderr(*pyperf, "Ready to profile", kPyPerfTimeout)) << "stderr:\n"
                                                                          << pyperf->Stderr();

  std::vector<std::string> delivered;
  Clock::time_point interval_start = launched;
  for (size_t dump = 1; dump <= 4; ++dump) {
    const bool last = dump == 4;
    SCOPED_TRACE(last ? "SIGTERM" : "SIGUSR2 #" + std::to_string(dump));
    WaitForWorkloadCpu(seconds(1));
    Clock::time_point signalled = Clock::now();
    pyperf->Signal(last ? SIGTERM : SIGUSR2);
    ASSERT_TRUE(WaitFor([&] { return DumpReports(pyperf->Stderr()).size() >= dump; },
                        kGProfilerDumpTimeout))
        << "no \"samples collected\" line within " << kGProfilerDumpTimeout.count()
        << " s; stderr:\n"
        << pyperf->Stderr();
    if (last) {
      auto status = pyperf->Wait(kGProfilerDumpTimeout);
      ASSERT_TRUE(status.has_value()) << "still running after the final dump";
      EXPECT_EQ(*status, 0) << "stderr:\n" << pyperf->Stderr();
    } else {
      // The stderr line is printed once the dump is complete: a fresh PATH
      // must be there already.
      EXPECT_TRUE(FileExists(path_)) << "the transient file is missing after the dump";
    }
    auto reports = DumpReports(pyperf->Stderr());
    ASSERT_EQ(reports.size(), dump) << "stderr:\n" << pyperf->Stderr();

    auto files = DumpedFiles(path_);
    ASSERT_EQ(files.size(), dump) << "one new PATH.* per dump";
    std::string file;
    for (const auto& f : files)
      if (std::find(delivered.begin(), delivered.end(), f) == delivered.end()) file = f;
    ASSERT_FALSE(file.empty());
    EXPECT_EQ(file, files.back()) << "the newest dump does not sort last";
    delivered.push_back(file);
    ExpectDelivered(file, path_, reports.back(), workload_->pid());

    // Stamped with the start of its interval (UTC, truncated to centiseconds).
    int64_t stamp = StampCentis(file, path_);
    EXPECT_GE(stamp, Centis(interval_start) - 1) << "stamp of " << file;
    EXPECT_LE(stamp, Centis(signalled) + 1) << "stamp of " << file;
    interval_start = signalled;
  }
}

TEST_F(OutputProtocolTest, DurationEndsWithAFinalDump) {
  auto pyperf = StartPyPerf(Args({"-d", "2", "-o", path_}));
  auto status = pyperf->Wait(kPyPerfTimeout);
  ASSERT_TRUE(status.has_value()) << "-d 2 did not end by itself; stderr:\n" << pyperf->Stderr();
  EXPECT_EQ(*status, 0) << "stderr:\n" << pyperf->Stderr();
  EXPECT_NE(pyperf->Stderr().find("Ready to profile"), std::string::npos);
  auto files = DumpedFiles(path_);
  auto reports = DumpReports(pyperf->Stderr());
  ASSERT_EQ(files.size(), 1u) << "stderr:\n" << pyperf->Stderr();
  ASSERT_EQ(reports.size(), 1u) << "stderr:\n" << pyperf->Stderr();
  ExpectDelivered(files[0], path_, reports[0], workload_->pid());
}

TEST_F(OutputProtocolTest, SigtermEndsWithAFinalDump) { ExpectFinalDumpOnSignal(SIGTERM); }

TEST_F(OutputProtocolTest, SigintEndsWithAFinalDump) { ExpectFinalDumpOnSignal(SIGINT); }

TEST_F(OutputProtocolTest, WithoutOutputPathStacksGoToStdoutAtTheEnd) {
  auto pyperf = StartPyPerf(Args({"-d", "2"}));
  auto status = pyperf->Wait(kPyPerfTimeout);
  ASSERT_TRUE(status.has_value()) << "stderr:\n" << pyperf->Stderr();
  EXPECT_EQ(*status, 0) << "stderr:\n" << pyperf->Stderr();
  auto reports = DumpReports(pyperf->Stderr());
  ASSERT_EQ(reports.size(), 1u) << "stderr:\n" << pyperf->Stderr();
  EXPECT_EQ(reports[0].output, "stdout");
  CollapsedProfile profile = ParseCollapsed(pyperf->Stdout());
  EXPECT_EQ(profile.TotalSamples(), reports[0].samples);
  EXPECT_FALSE(profile.OfPid(workload_->pid()).empty()) << "stdout:\n" << pyperf->Stdout();
  EXPECT_TRUE(DumpedFiles(path_).empty());
}

// gProfiler reads PyPerf's stderr only at each snapshot: in between, a
// verbose PyPerf fills the pipe. That must never delay a dump nor the exit.
TEST_F(OutputProtocolTest, UnreadStderrPipeNeverDelaysADump) {
  // One every kDumpEvery: 5 s with the pipe full (each dump writes more
  // lines the pipe cannot take; five show it is never a matter of luck).
  // gProfiler's cadence is slower; how often the signal comes does not
  // change what a full pipe does to a dump.
  constexpr size_t kDumps = 5;
  constexpr auto kDumpEvery = seconds(1);
  // gProfiler's dump timeout (tests/gprofiler/pyperf_harness.py DUMP_TIMEOUT): a
  // blocked write never ends, so more patience only keeps a busy host from failing.
  constexpr auto kDumpDeadline = seconds(5);
  constexpr auto kExitDeadline = seconds(10);
  // A pipe reports room only while a page is free: a pipe of two pages
  // stops taking lines once its second page is begun, its first full but for
  // the tail a line did not fit in (PyPerf's lines here are shorter than 512
  // bytes).
  constexpr size_t kFullPipeBytes = 4096 - 512;

  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0) << strerror(errno);
  ebpf::UniqueFd stderr_read_end(fds[0]), stderr_write_end(fds[1]);
  // A pipe of two pages (one would hold a single line: it is full once its
  // only page is begun), so that what -v 4 prints in the run fills it early.
  constexpr int kPipeBytes = 2 * 4096;
  ASSERT_EQ(fcntl(fds[1], F_SETPIPE_SZ, kPipeBytes), kPipeBytes) << strerror(errno);
  ChildProcess::Options options;
  options.stderr_fd = stderr_write_end.get();  // the child's fd 2; nobody reads the other end
  auto pyperf = StartPyPerf({"-v", "4", "-F", "999", "-o", path_}, options);
  stderr_write_end.reset();

  ASSERT_TRUE(WaitFor([&] { return FileExists(path_) || !pyperf->Running(); }, kPyPerfTimeout) &&
              FileExists(path_))
      << path_ << " did not appear within " << kPyPerfTimeout.count() << " s";

  // What -v 4 prints fills the pipe within a minute or so: wait until it
  // has (PyPerf's own output is the signal), then SIGUSR2 every
  // kDumpEvery, kDumps times, and SIGTERM at the end, which writes the last
  // interval's file.
  auto unread = [&] {
    int bytes = 0;
    ioctl(stderr_read_end.get(), FIONREAD, &bytes);
    return static_cast<size_t>(bytes);
  };
  ASSERT_TRUE(
      WaitFor([&] { return unread() >= kFullPipeBytes || !pyperf->Running(); }, seconds(300)) &&
      pyperf->Running())
      << "the pipe holds " << unread() << " bytes, not yet full";
  // Then the dumps, on the full pipe.
  size_t dumps = 0;
  auto next_signal = std::chrono::steady_clock::now();
  for (; dumps < kDumps;) {
    next_signal += kDumpEvery;
    std::this_thread::sleep_until(next_signal);
    SCOPED_TRACE("SIGUSR2 #" + std::to_string(dumps + 1));
    ASSERT_TRUE(pyperf->Running()) << "PyPerf exited with " << pyperf->ExitCode();
    pyperf->Signal(SIGUSR2);
    ++dumps;
    ASSERT_TRUE(WaitFor([&] { return DumpedFiles(path_).size() >= dumps; }, kDumpDeadline))
        << "no new " << path_ << ".* within " << kDumpDeadline.count() << " s of the signal";
  }

  WaitForWorkloadCpu(milliseconds(500));
  pyperf->Signal(SIGTERM);
  auto status = pyperf->Wait(kExitDeadline);
  ASSERT_TRUE(status.has_value()) << "still running " << kExitDeadline.count()
                                  << " s after SIGTERM";
  EXPECT_EQ(*status, 0);
  auto files = DumpedFiles(path_);
  ASSERT_EQ(files.size(), dumps + 1) << "one file per SIGUSR2 and a final one";
  CollapsedProfile last = ParseCollapsed(ReadFile(files.back()));
  bool has_main_busy = false;
  for (const auto& line : last.OfPid(workload_->pid()))
    for (const auto& frame : line.frames)
      if (IsPythonFunction(frame, "main_busy", "")) has_main_busy = true;
  EXPECT_TRUE(has_main_busy) << "the final dump has no stack of the workload with main_busy";

  // What the pipe holds: whole lines from the start, enough of them that the
  // pipe was full (so the test did exercise a stalled reader).
  fcntl(stderr_read_end.get(), F_SETFL, O_NONBLOCK);
  std::string text;
  char buf[65536];
  ssize_t n;
  while ((n = read(stderr_read_end.get(), buf, sizeof(buf))) > 0)
    text.append(buf, static_cast<size_t>(n));
  EXPECT_GE(text.size(), kFullPipeBytes) << "PyPerf wrote too little to fill the pipe:\n" << text;
  EXPECT_TRUE(text.empty() || text.back() == '\n') << "a torn last line";
  // "Ready to profile" is not looked for: on a host with many processes, -v 4
  // fills the pipe at start-up, and then it is one of the lines dropped.
  auto lines = SplitLines(text);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.front().rfind("PyPerf: task_struct offsets", 0), 0u) << "not from the start";
  for (const auto& line : lines)
    EXPECT_TRUE(line == "Ready to profile" || line.rfind("PyPerf: ", 0) == 0) << "torn: " << line;
}

// A pid that does not exist now: counting down from the kernel's pid_max.
pid_t UnusedPid() {
  pid_t pid_max = 32768;
  std::ifstream("/proc/sys/kernel/pid_max") >> pid_max;
  for (pid_t pid = pid_max - 1; pid > 1; --pid)
    if (kill(pid, 0) != 0 && errno == ESRCH) return pid;
  return -1;
}

// -p names a pid that does not exist and a process that is not Python: one
// warning each at start (not one per rescan), and PyPerf runs on and exits 0.
TEST(PyPerfPids, NamedPidsThatCannotBeProfiledGetOneWarningEach) {
  PYPERF_REQUIRE_BPF();
  pid_t missing = UnusedPid();
  ASSERT_GT(missing, 0) << "no unused pid";
  ChildProcess sleeper({"sleep", "30"});
  ASSERT_TRUE(sleeper.Running());
  auto pyperf = StartPyPerf({"-p", std::to_string(missing), "-p", std::to_string(sleeper.pid()),
                             "--update-interval", "1", "-d", "2"});
  auto status = pyperf->Wait(kPyPerfTimeout);
  ASSERT_TRUE(status.has_value()) << "-d 2 did not end by itself; stderr:\n" << pyperf->Stderr();
  EXPECT_EQ(*status, 0) << "stderr:\n" << pyperf->Stderr();
  for (pid_t pid : {missing, sleeper.pid()}) {
    std::regex names_pid("\\bpid " + std::to_string(pid) + "\\b");
    size_t warnings = 0;
    for (const auto& line : SplitLines(pyperf->Stderr()))
      if (line.rfind("PyPerf: warning: ", 0) == 0 && std::regex_search(line, names_pid)) ++warnings;
    EXPECT_EQ(warnings, 1u) << "warnings naming pid " << pid << "; stderr:\n" << pyperf->Stderr();
  }
  EXPECT_EQ(DumpReports(pyperf->Stderr()).size(), 1u) << "stderr:\n" << pyperf->Stderr();
}

// ---- The command line, as a user or gProfiler meets it.

void ExpectUsageError(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {PyPerfBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::string shown;
  for (const auto& a : args) shown += " " + a;
  SCOPED_TRACE("PyPerf" + shown);
  CommandResult result = RunCommand(argv, seconds(30));
  EXPECT_EQ(result.exit_code, 2) << "stderr:\n" << result.err;
  auto lines = SplitLines(result.err);
  EXPECT_EQ(lines.size(), 1u) << "stderr:\n" << result.err;
  EXPECT_EQ(result.err.rfind("PyPerf: error: ", 0), 0u) << "stderr:\n" << result.err;
  EXPECT_EQ(result.out, "");
}

TEST(PyPerfCommandLine, UsageErrorsExitTwoWithOneLine) {
  ExpectUsageError({"--bogus"});
  ExpectUsageError({"-v"});
  ExpectUsageError({"-F", "abc"});
  ExpectUsageError({"-F", "10", "-c", "100"});
}

TEST(PyPerfCommandLine, HelpListsEveryFlag) {
  CommandResult result = RunCommand({PyPerfBinary(), "--help"}, seconds(30));
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.err, "");
  for (const char* flag : {"-h",
                           "--help",
                           "-p",
                           "--pid",
                           "-c",
                           "--sample-rate",
                           "-F",
                           "--frequency",
                           "-d",
                           "--duration",
                           "--update-interval",
                           "--symbols-map-size",
                           "--events-buffer-pages",
                           "--kernel-stacks-map-size",
                           "--user-stacks-pages",
                           "-v",
                           "--verbose",
                           "-o",
                           "--output",
                           "--fs-offset",
                           "--stack-offset",
                           "--insert-dso-name",
                           "--line-numbers",
                           "--native-cache",
                           "--native-cache-entries",
                           "--native-cache-bytes",
                           "--native-cache-max-age"}) {
    std::regex listed(std::string("(^|[\\s,])") + flag + "([\\s,=]|$)");
    EXPECT_TRUE(std::regex_search(result.out, listed)) << flag << " is not in --help:\n"
                                                       << result.out;
  }
  EXPECT_TRUE(!result.out.empty() && result.out.back() == '\n')
      << "--help does not end with a newline (the shell prompt lands on its last line)";
}

// Without privileges PyPerf exits 1 (README, Requirements) with one line
// saying which capabilities are missing and how to grant them.
TEST(PyPerfCommandLine, UnprivilegedUserIsToldWhatIsMissing) {
  if (geteuid() != 0) PYPERF_SKIP_OR_FAIL("needs root to run PyPerf as nobody");
  if (access("/usr/bin/setpriv", X_OK) != 0) PYPERF_SKIP_OR_FAIL("setpriv is not installed");
  CommandResult result =
      RunCommand({"/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                  "--inh-caps=-all", PyPerfBinary(), "-d", "1"},
                 seconds(30));
  EXPECT_EQ(result.exit_code, 1) << "stderr:\n" << result.err;
  // nobody with no capabilities lacks both.
  EXPECT_TRUE(std::regex_match(
      result.err,
      std::regex("PyPerf: error: insufficient privileges to load BPF programs \\(missing "
                 "CAP_BPF and CAP_PERFMON\\): run as root, or grant CAP_BPF \\+ "
                 "CAP_PERFMON [^\n]*\n")))
      << "not the one line naming what is missing; stderr:\n"
      << result.err;
  EXPECT_EQ(result.out, "");
}

// ---- The reader the e2e tests use (support/collapsed.h), on known lines.

// Frames spelled as PyPerf spells them (FrameSpelling.h).
std::string SpelledPython(const std::string& text) {
  return ebpf::pyperf::SpellFrame(ebpf::pyperf::FrameKind::kPython, text);
}
std::string SpelledNative(const std::string& text) {
  return ebpf::pyperf::SpellFrame(ebpf::pyperf::FrameKind::kNative, text);
}
std::string SpelledKernel(const std::string& text) {
  return ebpf::pyperf::SpellFrame(ebpf::pyperf::FrameKind::kKernel, text);
}
std::string SpelledMarker(std::string_view text) {
  return ebpf::pyperf::SpellFrame(ebpf::pyperf::FrameKind::kMarker, text);
}

TEST(CollapsedReader, ReadsALineAsGProfilerDoes) {
  std::string why;
  const std::string python = SpelledPython("a.f (/a.py:3)"), native = SpelledNative("read"),
                    kernel = SpelledKernel("do_syscall_64");
  auto line =
      ParseCollapsedLine("my-app 2-10/12;" + python + ";" + native + ";" + kernel + " 42", &why);
  ASSERT_TRUE(line.has_value()) << why;
  EXPECT_EQ(line->comm, "my-app 2");
  EXPECT_EQ(line->pid, 10);
  EXPECT_EQ(line->tid, 12);
  EXPECT_EQ(line->count, 42u);
  EXPECT_EQ(line->frames, (std::vector<std::string>{python, native, kernel}));
  EXPECT_EQ(FramesOfKind(*line, FrameKind::kNative), std::vector<std::string>{native});
  EXPECT_EQ(LeafIgnoringNativeAndKernel(*line), python);
  EXPECT_FALSE(FrameOrderProblem(*line).has_value());
}

TEST(CollapsedReader, RejectsLinesGProfilerCannotRead) {
  const std::string f = SpelledPython("f");
  for (const std::string& text :
       {"python-1/1;" + f, "python-1/1;" + f + " x", std::string("python-1/1 3"),
        "python1/1;" + f + " 3", "python-1;" + f + " 3", "python-1/1;;" + f + " 3"}) {
    std::string why;
    EXPECT_FALSE(ParseCollapsedLine(text, &why).has_value()) << text;
    EXPECT_FALSE(why.empty()) << text;
  }
  // A line gProfiler would drop fails the test that reads it.
  CollapsedProfile profile;
  EXPECT_NONFATAL_FAILURE(
      profile = ParseCollapsed("python-1/2;" + f + " 3\nbad\n\npython-1/3;" + SpelledPython("g") +
                               " 4\n"),
      "1 of 3 lines gProfiler could not read, the first: no ' ' before the count: bad");
  EXPECT_EQ(profile.lines.size(), 2u);
  EXPECT_EQ(profile.unparseable.size(), 1u);
  EXPECT_EQ(profile.TotalSamples(), 7u);
}

TEST(CollapsedReader, SplitsPythonFrames) {
  auto method = ParsePythonFrame(
      SpelledPython("json.decoder.JSONDecoder.decode (/usr/lib/python3.11/json/decoder.py:332)"));
  ASSERT_TRUE(method.has_value());
  EXPECT_EQ(method->module, "json.decoder");
  EXPECT_EQ(method->class_name, "JSONDecoder");
  EXPECT_EQ(method->function, "decode");
  EXPECT_EQ(method->file, "/usr/lib/python3.11/json/decoder.py");
  EXPECT_EQ(method->line, 332);

  auto function = ParsePythonFrame(SpelledPython("work.x.app.<module> (/work/x/app.py:1)"));
  ASSERT_TRUE(function.has_value());
  EXPECT_EQ(function->module, "work.x.app");
  EXPECT_EQ(function->class_name, "");
  EXPECT_EQ(function->function, "<module>");

  auto odd_path = ParsePythonFrame(SpelledPython("a (b).m.f (/a (b)/m.py:7)"));
  ASSERT_TRUE(odd_path.has_value());
  EXPECT_EQ(odd_path->file, "/a (b)/m.py");
  EXPECT_EQ(odd_path->function, "f");

  std::string why;
  EXPECT_FALSE(ParsePythonFrame(SpelledPython("other.f (/work/x/app.py:1)"), &why).has_value());
  EXPECT_NE(why.find("module"), std::string::npos) << why;
  EXPECT_FALSE(ParsePythonFrame(SpelledPython("f (/a.py:x)")).has_value());
  EXPECT_FALSE(ParsePythonFrame(SpelledKernel("f")).has_value());
}

// The parser's module rule is the README's, written apart from PyPerf's
// PythonModuleName: checked here on literals.
TEST(CollapsedReader, ExpectsTheModuleTheReadmeNames) {
  const std::pair<const char*, const char*> cases[] = {
      {"/usr/lib/python3.11/json/decoder.py", "json.decoder"},
      {"/root/.pyenv/versions/3.12.1/lib/python3.12/threading.py", "threading"},
      {"/usr/lib64/python3.9/os.py", "os"},
      {"/opt/py/lib/python3.13t/json/__init__.py", "json"},
      {"/usr/lib/python3/dist-packages/apt/cache.py", "apt.cache"},
      {"/venv/lib/python3.11/site-packages/flask/app.py", "flask.app"},
      {"/work/x/app.py", "work.x.app"},
      {"./tools/run.py", "tools.run"},
      {"/home/u/python3.11/x.py", "home.u.python3.11.x"},
      {"/srv/lib/pythonic/x.py", "srv.lib.pythonic.x"},
      {"<frozen importlib._bootstrap>", "importlib._bootstrap"},
      {"<string>", "<string>"},
      {"", ""},
  };
  for (const auto& [file, module] : cases) EXPECT_EQ(ExpectedModuleOf(file), module) << file;
}

TEST(CollapsedReader, FindsMarkersAndOrderProblems) {
  const std::string python = SpelledPython("m.f (/m.py:1)");
  const std::string lost = SpelledMarker(ebpf::pyperf::kLostSymbol);
  auto truncated =
      ParseCollapsedLine("p-1/1;" + kTruncationMarker + ";" + lost + ";" + python + " 1", nullptr);
  ASSERT_TRUE(truncated.has_value());
  EXPECT_TRUE(IsTruncated(*truncated));
  EXPECT_EQ(ErrorMarkers(*truncated), std::vector<std::string>{lost});
  EXPECT_FALSE(FrameOrderProblem(*truncated).has_value());

  // A native marker stands among the native frames, and is not a Python error.
  const std::string native_error = ebpf::pyperf::NativeStackErrorFrame("unw_step (no unwind info)");
  auto native = ParseCollapsedLine("p-1/1;" + python + ";" + native_error + ";" +
                                       SpelledNative("f") + ";" + SpelledKernel("k") + " 1",
                                   nullptr);
  ASSERT_TRUE(native.has_value());
  EXPECT_TRUE(IsNativeMarker(native_error));
  EXPECT_TRUE(ErrorMarkers(*native).empty());
  EXPECT_FALSE(FrameOrderProblem(*native).has_value());

  auto kernel_first =
      ParseCollapsedLine("p-1/1;" + SpelledKernel("vfs_read") + ";" + python + " 1", nullptr);
  ASSERT_TRUE(kernel_first.has_value());
  EXPECT_TRUE(FrameOrderProblem(*kernel_first).has_value());
  auto late_marker =
      ParseCollapsedLine("p-1/1;" + python + ";" + kTruncationMarker + " 1", nullptr);
  ASSERT_TRUE(late_marker.has_value());
  EXPECT_FALSE(IsTruncated(*late_marker));
  EXPECT_TRUE(FrameOrderProblem(*late_marker).has_value());

  auto order = FindInOrder({"a", "b", "c", "d"}, {[](const std::string& f) { return f == "b"; },
                                                  [](const std::string& f) { return f == "d"; }});
  ASSERT_TRUE(order.has_value());
  EXPECT_EQ(*order, (std::vector<size_t>{1, 3}));
  EXPECT_FALSE(FindInOrder({"a", "b"}, {[](const std::string& f) { return f == "b"; },
                                        [](const std::string& f) { return f == "a"; }})
                   .has_value());
}

}  // namespace
}  // namespace pyperf_test
