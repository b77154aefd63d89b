// PyPerf only reads the processes it profiles (issue 11, "read-only,
// provably"). A whole-host run with native stacks, under `strace -f`, over:
// a pyenv 3.11 process in zlib (native and kernel frames), a Python in a
// container (the trixie root, own PID and mount namespaces) and churn (short
// Python processes started and ended throughout, each seen by a rescan).
// Asserted from the trace: no ptrace, no process_vm_writev, no signal sent
// to any process but PyPerf itself (kill, tkill, tgkill, pidfd_send_signal,
// rt_sigqueueinfo), and no /proc/<pid>/ file opened for writing. The profile
// must show the native frames and the container's Python frames, so the
// trace covers the paths that read them.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "support/collapsed.h"
#include "support/e2e.h"
#include "support/python_roots.h"
#include "support/test_support.h"

namespace pyperf_test {
namespace {

constexpr int kChurnProcesses = 15;

bool AnyFrameContains(const std::vector<CollapsedLine>& lines, FrameKind kind,
                      const std::string& part) {
  for (const auto& line : lines)
    for (const auto& frame : FramesOfKind(line, kind))
      if (frame.find(part) != std::string::npos) return true;
  return false;
}

TEST(ReadOnly, StraceOfAWholeHostRunShowsNoWriteSignalOrPtrace) {
  auto python = FindInterpreter("3.11");
  if (!python) PYPERF_SKIP_OR_FAIL("pyenv's Python 3.11 is not installed");
  PYPERF_REQUIRE_BPF();
  const std::string strace = FindInPath("strace");
  if (strace.empty()) PYPERF_SKIP_OR_FAIL("strace is not installed (scripts/setup.sh installs it)");
  std::string why;
  auto root = EnsurePythonRoot("trixie", &why);
  if (!root) PYPERF_SKIP_OR_FAIL("no Debian trixie root: " + why);

  auto native = StartWorkload(*python, "native_zlib_loop.py");
  ASSERT_NE(native, nullptr);
  RootTempDir root_dir(*root);
  const std::string inside =
      root_dir.Copy(std::string(PYPERF_TEST_DIR) + "/workloads/native_busy_loop.py", "busy.py");
  ChildProcess container(ContainerArgv(*root, {root->python, inside}));
  ASSERT_TRUE(
      WaitFor([&] { return container.Stdout().find("ready") != std::string::npos; }, seconds(60)))
      << "the container's Python did not start: " << container.Stderr();

  TempDir dir;
  const std::string trace = dir.File("strace.log");
  std::vector<std::string> argv = {strace,
                                   "-f",
                                   "--seccomp-bpf",
                                   "-qq",
                                   "-o",
                                   trace,
                                   "-e",
                                   "trace=ptrace,process_vm_writev,kill,tkill,tgkill,"
                                   "pidfd_send_signal,rt_sigqueueinfo,rt_tgsigqueueinfo,open,"
                                   "openat,openat2",
                                   PyPerfBinary(),
                                   "-v",
                                   "1",
                                   "-F",
                                   "199",
                                   "--update-interval",
                                   "1"};
  ChildProcess pyperf(argv);
  ASSERT_TRUE(WaitForStderr(pyperf, "Ready to profile", seconds(120))) << pyperf.Stderr();

  // Churn: short Python processes, one after another, each alive long enough
  // (0.4 s of CPU) to be seen by a rescan now and then.
  for (int i = 0; i < kChurnProcesses; ++i) {
    ChildProcess brief({python->path, "-c",
                        "import time\nend = time.process_time() + 0.4\n"
                        "while time.process_time() < end: pass\n"});
    ASSERT_TRUE(WaitFor([&] { return !brief.Running(); }, seconds(60)));
  }
  EXPECT_TRUE(WaitForCpu(native->pid(), seconds(1)));
  // SIGTERM to PyPerf itself (strace's child), as gProfiler would send it.
  auto traced = ChildPids(pyperf.pid());
  ASSERT_EQ(traced.size(), 1u) << "strace should have one child, PyPerf";
  ASSERT_EQ(kill(traced[0], SIGTERM), 0);
  PyPerfRun run = FinishPyPerf(pyperf, "PyPerf under strace -f", seconds(60));

  EXPECT_TRUE(AnyFrameContains(run.profile.OfPid(native->pid()), FrameKind::kNative, "deflate"))
      << "no native zlib frames:" << Excerpt(run.profile.OfPid(native->pid()));
  bool container_seen = false;
  for (const auto& line : run.profile.lines)
    for (const auto& frame : FramesOfKind(line, FrameKind::kPython))
      if (frame.find("busy") != std::string::npos && line.pid != native->pid())
        container_seen = true;
  EXPECT_TRUE(container_seen) << "no Python frames of the container's process";
  EXPECT_NE(run.stderr_text.find("exited"), std::string::npos)
      << "no churned process was profiled and forgotten (-v 1 logs it)";

  // The trace: "<tid> <syscall>(<args>) = <result>".
  const std::string log = ReadFile(trace);
  ASSERT_FALSE(log.empty()) << "strace wrote nothing";
  std::set<long> own;  // PyPerf's threads: every tid the trace names
  static const std::regex line_re(R"(^(\d+) +(\w+)\((.*)$)");
  std::vector<std::pair<std::string, std::string>> calls;  // (syscall, args...)
  for (const auto& line : SplitLines(log)) {
    std::smatch m;
    if (!std::regex_search(line, m, line_re)) continue;
    own.insert(std::stol(m[1]));
    calls.emplace_back(m[2], m[3]);
  }
  ASSERT_FALSE(calls.empty()) << log.substr(0, 2000);
  size_t opens = 0;
  static const std::regex proc_pid_file(R"re("/proc/\d+/)re");
  for (const auto& [name, args] : calls) {
    SCOPED_TRACE(name + "(" + args);
    EXPECT_NE(name, "ptrace");
    EXPECT_NE(name, "process_vm_writev");
    if (name == "kill" || name == "tkill" || name == "tgkill" || name == "rt_sigqueueinfo" ||
        name == "rt_tgsigqueueinfo") {
      const long target = std::stol(args);
      EXPECT_TRUE(own.count(target)) << "a signal to pid " << target << ", not PyPerf's";
    }
    EXPECT_NE(name, "pidfd_send_signal");
    if (name == "open" || name == "openat" || name == "openat2") {
      ++opens;
      if (std::regex_search(args, proc_pid_file)) {
        EXPECT_EQ(args.find("O_WRONLY"), std::string::npos) << "a /proc/<pid> file opened to write";
        EXPECT_EQ(args.find("O_RDWR"), std::string::npos) << "a /proc/<pid> file opened to write";
      }
    }
  }
  std::cout << "[ e2e ] strace -f: " << calls.size() << " traced calls (" << opens << " opens) by "
            << own.size() << " PyPerf threads" << std::endl;
  EXPECT_GT(opens, 0u) << "the trace holds no open: the filter traced nothing";
}

}  // namespace
}  // namespace pyperf_test
