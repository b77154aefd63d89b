// A profiled Python process that execs keeps its pid and start time; only
// the exec itself tells. The BPF program notes the time of every exec on the
// host, PyPerf reads it before it inspects a process, and a sample taken after
// a later exec is marked `replaced`: PyPerf must print no Python frame decoded
// with the old program's offsets, show "[Process Replaced]" once, inspect the
// process again, and go on with the right frames (a Python program) or drop
// it (another program). Checked for an exec after samples of the first image,
// and for one between the inspection and the first sample (a process blocked
// until it execs): from a forked child as gProfiler starts its helpers, and
// for each layout kind (shared libpython, static, container).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "FrameSpelling.h"
#include "support/collapsed.h"
#include "support/e2e.h"
#include "support/python_roots.h"
#include "support/test_support.h"

namespace pyperf_test {
namespace {

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(ProcessExec, AnExecIntoAnotherInterpreterIsNoticedAndInspectedAgain) {
  auto first = FindInterpreter("3.11");
  auto second = FindInterpreter("3.8");
  if (!first || !second) PYPERF_SKIP_OR_FAIL("pyenv 3.11 and 3.8 are needed");
  PYPERF_REQUIRE_BPF();
  TempDir dir;
  const std::string trigger = dir.path() + "/exec-now";
  auto workload = StartWorkload(*first, "exec_into.py", {"first", second->path, trigger});
  ASSERT_NE(workload, nullptr);
  const pid_t pid = workload->pid();
  const std::string profiling = "profiling pid " + std::to_string(pid) + " ";
  auto pyperf = StartPyPerf({"-v", "1", "-F", "199", "-p", std::to_string(pid)});
  ASSERT_TRUE(WaitForStderr(*pyperf, profiling, seconds(120))) << pyperf->Stderr();
  EXPECT_TRUE(WaitForCpu(pid, seconds(1)));  // samples of the first image

  { std::ofstream(trigger) << "go\n"; }
  ASSERT_TRUE(WaitFor([&] { return Count(pyperf->Stderr(), profiling) >= 2; }, seconds(60)))
      << "PyPerf did not inspect pid " << pid << " again after its exec; stderr:\n"
      << pyperf->Stderr();
  EXPECT_TRUE(WaitForCpu(pid, seconds(1)));  // samples of the second image
  pyperf->Signal(SIGTERM);
  PyPerfRun run = FinishPyPerf(*pyperf, "PyPerf -p " + std::to_string(pid), seconds(120));

  const std::string stderr_text = run.stderr_text;
  size_t second_look = stderr_text.find(profiling, stderr_text.find(profiling) + 1);
  ASSERT_NE(second_look, std::string::npos);
  EXPECT_NE(stderr_text.find("(CPython 3.8", second_look), std::string::npos)
      << "the second look did not find CPython 3.8:\n"
      << stderr_text;

  // Every Python frame is one of the script's own, or of the interpreters'
  // start-up (code with a pseudo-file name such as "<frozen importlib._bootstrap>"
  // or "<string>", the line of a .pth file site.py runs; a module file that
  // exists): a frame decoded with the other interpreter's offsets would name
  // something else, or fail to parse.
  const std::set<std::string> known = {"before_exec_spin", "after_exec_spin", "<module>"};
  auto from_an_interpreter = [&](const std::string& file) {
    const bool pseudo = file.size() > 2 && file.front() == '<' && file.back() == '>';
    return pseudo ||
           (file.find("exec_into.py") == std::string::npos && std::filesystem::exists(file));
  };
  uint64_t after = 0, before = 0;
  for (const auto& line : run.profile.OfPid(pid)) {
    for (const auto& frame : FramesOfKind(line, FrameKind::kPython)) {
      std::string why;
      auto parsed = ParsePythonFrame(frame, &why);
      ASSERT_TRUE(parsed.has_value()) << why << ": " << line.text;
      if (from_an_interpreter(parsed->file)) continue;
      EXPECT_NE(parsed->file.find("exec_into.py"), std::string::npos) << line.text;
      EXPECT_TRUE(known.count(parsed->function))
          << "a frame the script does not have: " << line.text;
    }
    for (const auto& frame : line.frames) {
      if (IsPythonFunction(frame, "after_exec_spin")) after += line.count;
      if (IsPythonFunction(frame, "before_exec_spin")) before += line.count;
    }
  }
  EXPECT_GT(before, 0u) << "no samples before the exec";
  EXPECT_GT(after, 0u) << "no samples of the exec'd interpreter";
  auto replaced = DumpCounter(stderr_text, "replaced processes");
  ASSERT_TRUE(replaced.has_value()) << stderr_text;
  std::cout << "[ exec ] samples before " << before << ", after " << after << ", replaced "
            << *replaced << std::endl;
}

// --- An exec between the inspection and the first sample --------------------

const std::string& ReplacedMarker() {
  static const std::string marker =
      ebpf::pyperf::SpellFrame(ebpf::pyperf::FrameKind::kMarker, ebpf::pyperf::kProcessReplaced);
  return marker;
}

bool HasFrame(const CollapsedLine& line, const std::string& frame) {
  return std::find(line.frames.begin(), line.frames.end(), frame) != line.frames.end();
}

// Opens `fifo` for writing (blocking until the workload has it open for
// reading) and writes one line: the workload execs.
void Trigger(const std::string& fifo) {
  int fd = open(fifo.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << "cannot open " << fifo;
  ASSERT_EQ(write(fd, "go\n", 3), 3);
  close(fd);
}

// What one blocked-then-exec run printed for the process that exec'd.
struct ExecRun {
  pid_t pid = 0;
  PyPerfRun run;
  std::vector<CollapsedLine> lines;  // the process's
};

// Starts exec_when_told.py (`argv`: the interpreter, its path to the script
// and the script's arguments, run with `container` when given), waits for
// PyPerf (`pyperf_args`, -v 1 added) to start profiling the process named by
// the script's "ready PID" (the host pid: unshare's one child in a
// container), triggers the exec through `fifo` (host path), lets the new
// program run `cpu` of CPU time, and stops PyPerf.
ExecRun RunBlockedExec(const std::vector<std::string>& argv, const std::string& fifo,
                       const PythonRoot* container, std::vector<std::string> pyperf_args,
                       bool target_by_pid) {
  ExecRun out;
  std::unique_ptr<ChildProcess> workload =
      std::make_unique<ChildProcess>(container ? ContainerArgv(*container, argv) : argv);
  // A forked child outlives its parent: kill the workload's process group
  // (its own: ChildProcess starts one), whatever happens below. A container
  // ends with unshare.
  struct KillGroup {
    pid_t group;
    ~KillGroup() { kill(-group, SIGKILL); }
  } kill_group{workload->pid()};
  std::string ready;
  if (!WaitFor(
          [&] {
            ready = workload->Stdout();
            return ready.find('\n') != std::string::npos || !workload->Running();
          },
          kWorkloadReadyTimeout) ||
      ready.rfind("ready ", 0) != 0) {
    ADD_FAILURE() << "the workload did not start: " << ready << workload->Stderr();
    return out;
  }
  out.pid = static_cast<pid_t>(std::stol(ready.substr(6)));
  if (container) {
    auto children = ChildPids(workload->pid());
    if (children.size() != 1) {
      ADD_FAILURE() << "unshare has " << children.size() << " children";
      return out;
    }
    out.pid = children[0];
  }
  const std::string profiling = "profiling pid " + std::to_string(out.pid) + " ";
  pyperf_args.insert(pyperf_args.end(), {"-v", "1", "-F", "199"});
  if (target_by_pid) pyperf_args.insert(pyperf_args.end(), {"-p", std::to_string(out.pid)});
  auto pyperf = StartPyPerf(pyperf_args);
  if (!WaitForStderr(*pyperf, profiling, seconds(120))) {
    ADD_FAILURE() << "PyPerf never profiled pid " << out.pid << ":\n" << pyperf->Stderr();
    return out;
  }
  Trigger(fifo);
  EXPECT_TRUE(WaitForCpu(out.pid, seconds(1))) << "the exec'd program did not run";
  pyperf->Signal(SIGTERM);
  out.run = FinishPyPerf(*pyperf, "PyPerf " + std::to_string(out.pid), seconds(120));
  out.lines = out.run.profile.OfPid(out.pid);
  return out;
}

// A sample inside the execve system call itself: its kernel frames hold the
// exec (e.g. __x64_sys_execve, do_execveat_common).
bool InExecve(const CollapsedLine& line) {
  for (const auto& frame : FramesOfKind(line, FrameKind::kKernel))
    if (frame.find("execve") != std::string::npos) return true;
  return false;
}

// What holds whatever the new program: until told, the process used no CPU
// (blocked), so every sample is of the few steps to the exec, the exec or
// the new program; exactly one carries the marker (PyPerf forgets the process at once, and events
// of it still queued are dropped), and none has a sample error (a walk with the old image's
// offsets: the bug this guards against printed only
// "[Sample Error NO_INTERPRETER]"), but for a sample inside execve after the
// old image was unmapped and before the exec is complete (the kernel notes
// the exec at its end), where no interpreter is there to read.
void ExpectReplacedOnce(const ExecRun& exec) {
  uint64_t replaced = 0;
  for (const auto& line : exec.lines) {
    if (!InExecve(line)) {
      EXPECT_EQ(line.text.find(std::string(ebpf::pyperf::kSampleErrorOpen)), std::string::npos)
          << line.text;
    }
    if (HasFrame(line, ReplacedMarker())) replaced += line.count;
  }
  EXPECT_GE(replaced, 1u) << "no sample shows " << ReplacedMarker() << ":" << Excerpt(exec.lines);
  EXPECT_LE(replaced, 1u) << "the process was shown replaced more than once:"
                          << Excerpt(exec.lines);
  auto counter = DumpCounter(exec.run.stderr_text, "replaced processes");
  ASSERT_TRUE(counter.has_value()) << exec.run.stderr_text;
  EXPECT_EQ(*counter, replaced);
}

// A sample of the old program between its wake-up and its exec: Python
// frames of exec_when_told.py, rightly named (the process runs a little
// Python after the FIFO's line arrives).
bool BeforeTheExec(const CollapsedLine& line) {
  for (const auto& frame : FramesOfKind(line, FrameKind::kPython))
    if (IsPythonFunction(frame, "wait_then_exec")) return true;
  return false;
}

// A program that is not Python: after the one replaced sample, dropped.
void ExpectDroppedAfterReplaced(const ExecRun& exec) {
  ExpectReplacedOnce(exec);
  for (const auto& line : exec.lines) {
    EXPECT_TRUE(HasFrame(line, ReplacedMarker()) || InExecve(line) || BeforeTheExec(line))
        << line.text;
  }
}

// A Python program: after the replaced sample, profiled with its own frames.
void ExpectProfiledAfterReplaced(const ExecRun& exec) {
  ExpectReplacedOnce(exec);
  uint64_t spinning = 0;
  for (const auto& line : exec.lines) {
    for (const auto& frame : line.frames)
      if (IsPythonFunction(frame, "after_exec_spin")) spinning += line.count;
  }
  EXPECT_GT(spinning, 0u) << "the exec'd interpreter was not profiled:" << Excerpt(exec.lines);
}

const char kCoreutilsProgram[] = "/usr/bin/sha256sum";

// The reproduction, as the gProfiler agent meets it: a Python process
// forks, its child is inspected by a host-wide PyPerf, and execs a program
// that is not Python before it is ever sampled.
TEST(ProcessExec, AForkedChildThatExecsBeforeItsFirstSampleIsReplacedThenDropped) {
  auto python = FindInterpreter("3.11");
  if (!python) PYPERF_SKIP_OR_FAIL("pyenv 3.11 is needed");
  PYPERF_REQUIRE_BPF();
  TempDir dir;
  const std::string fifo = dir.File("exec-now");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  ExecRun exec = RunBlockedExec({python->path, WorkloadPath("exec_when_told.py"), "--fork", fifo,
                                 kCoreutilsProgram, "sha256sum", "/dev/zero"},
                                fifo, nullptr, {}, /*target_by_pid=*/false);
  ASSERT_NE(exec.pid, 0);
  ExpectDroppedAfterReplaced(exec);
  // The child's steps from its wake-up to the exec (and a sample inside
  // execve, which renames it at its end) are the Python child's; every other
  // sample is of the new program, named by it.
  for (const auto& line : exec.lines) {
    if (BeforeTheExec(line) || InExecve(line)) continue;
    EXPECT_EQ(line.comm, "sha256sum") << line.text;
  }
  std::cout << "[ exec ] forked child: " << exec.lines.size() << " lines" << std::endl;
}

// One layout kind, and what the process execs.
struct BlockedExecCase {
  std::string name;
  std::string interpreter;  // pyenv minor, a host path, or "root:<suite>"
  bool exec_python;         // exec_into.py's second image, else sha256sum
};
std::ostream& operator<<(std::ostream& os, const BlockedExecCase& c) { return os << c.name; }

class BlockedExec : public ::testing::TestWithParam<BlockedExecCase> {};

TEST_P(BlockedExec, AnExecBeforeTheFirstSampleIsSeen) {
  const BlockedExecCase& c = GetParam();
  PYPERF_REQUIRE_BPF();
  std::optional<PythonRoot> root;
  std::unique_ptr<RootTempDir> root_dir;
  std::unique_ptr<TempDir> host_dir;
  std::string python, script, fifo_host, fifo_inside;
  if (c.interpreter.rfind("root:", 0) == 0) {
    std::string why;
    root = EnsurePythonRoot(c.interpreter.substr(5), &why);
    if (!root) PYPERF_SKIP_OR_FAIL("no Debian root " + c.interpreter + ": " + why);
    root_dir = std::make_unique<RootTempDir>(*root);
    python = root->python;
    script = root_dir->Copy(WorkloadPath("exec_when_told.py"), "exec_when_told.py");
    root_dir->Copy(WorkloadPath("exec_into.py"), "exec_into.py");
    fifo_host = root_dir->path() + "/exec-now";
    fifo_inside = root_dir->inside() + "/exec-now";
  } else {
    auto found = FindInterpreter(c.interpreter);
    if (!found) PYPERF_SKIP_OR_FAIL("interpreter " + c.interpreter + " is not installed");
    host_dir = std::make_unique<TempDir>();
    python = found->path;
    script = WorkloadPath("exec_when_told.py");
    fifo_host = fifo_inside = host_dir->File("exec-now");
  }
  ASSERT_EQ(mkfifo(fifo_host.c_str(), 0600), 0);
  std::vector<std::string> argv = {python, script, fifo_inside};
  if (c.exec_python) {
    // The same interpreter again on another script: the same executable,
    // pid and start time, a new image.
    std::string second = root ? root_dir->inside() + "/exec_into.py" : WorkloadPath("exec_into.py");
    argv.insert(argv.end(), {python, second, "second"});
  } else {
    argv.insert(argv.end(), {kCoreutilsProgram, "sha256sum", "/dev/zero"});
  }
  ExecRun exec = RunBlockedExec(argv, fifo_host, root ? &*root : nullptr, {},
                                /*target_by_pid=*/true);
  ASSERT_NE(exec.pid, 0);
  if (c.exec_python) {
    ExpectProfiledAfterReplaced(exec);
  } else {
    ExpectDroppedAfterReplaced(exec);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, BlockedExec,
    ::testing::Values(BlockedExecCase{"shared_libpython_to_sha256sum", "3.11", false},
                      BlockedExecCase{"shared_libpython_to_itself", "3.12", true},
                      BlockedExecCase{"static_to_itself", "/usr/bin/python3.11", true},
                      BlockedExecCase{"container_to_itself", "root:trixie", true},
                      BlockedExecCase{"container_to_sha256sum", "root:trixie", false}),
    [](const ::testing::TestParamInfo<BlockedExecCase>& info) { return info.param.name; });

}  // namespace
}  // namespace pyperf_test
