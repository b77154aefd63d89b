// Helpers of the end-to-end tests: finding the interpreters they run, starting
// a workload and waiting for its "ready" line, and starting the built PyPerf,
// waiting for it and reading what it wrote.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "support/collapsed.h"
#include "support/test_support.h"

namespace pyperf_test {

// The units the end-to-end tests state their times in.
using std::chrono::milliseconds;
using std::chrono::seconds;

// How long a workload may take to print its "ready" line.
inline constexpr std::chrono::seconds kWorkloadReadyTimeout{30};
// How long a PyPerf run of a few seconds (-d) may take: its startup (BPF
// compile and load) plus the run, with room for a busy machine.
inline constexpr std::chrono::seconds kPyPerfTimeout{90};

// The interpreter for `spec`: "X.Y" is pyenv's X.Y.z, a path is that binary,
// named after its path ("/usr/bin/python3.11" -> "usr-bin-python3.11").
// Nullopt if it is not installed.
std::optional<Interpreter> FindInterpreter(const std::string& spec);
// The interpreter for tests that need just one: the first installed of pyenv
// 3.11, Debian's /usr/bin/python3.11, pyenv 3.12 and 3.10.
std::optional<Interpreter> AnyInterpreter();
// The full path of `program` in $PATH, or "" if it is not there.
std::string FindInPath(const std::string& program);

// Test-name suffix for an interpreter spec: "3.11" -> "pyenv_3_11",
// "/usr/bin/python3.11" -> "usr_bin_python3_11".
std::string SpecTestName(const std::string& spec);

// Starts `python` on tests/cc/workloads/<script> with `args` (and `env` added
// to its environment) and waits kWorkloadReadyTimeout for its "ready" line.
// On failure, adds a test failure with what the workload printed and returns
// nullptr.
std::unique_ptr<ChildProcess> StartWorkload(const Interpreter& python, const std::string& script,
                                            const std::vector<std::string>& args = {},
                                            const std::map<std::string, std::string>& env = {});

// A fixture whose SetUp starts tests/cc/workloads/<script> (the script the
// derived fixture names) on the interpreter for `spec` (FindInterpreter), or
// on AnyInterpreter() when `spec` is empty; it skips the test (fails it in
// strict mode) when there is no such interpreter or no BPF.
class PythonWorkloadTest : public ::testing::Test {
 protected:
  explicit PythonWorkloadTest(std::string script, std::string spec = "")
      : script_(std::move(script)), spec_(std::move(spec)) {}
  void SetUp() override;

  std::optional<Interpreter> python_;
  std::unique_ptr<ChildProcess> workload_;

 private:
  std::string script_;
  std::string spec_;
};

// Starts the built PyPerf with `args`.
std::unique_ptr<ChildProcess> StartPyPerf(const std::vector<std::string>& args,
                                          const ChildProcess::Options& options = {});

// Waits until `text` is on the child's stderr or the child ends; true if the
// text is there.
bool WaitForStderr(ChildProcess& child, const std::string& text, std::chrono::milliseconds timeout);

struct PyPerfRun {
  CollapsedProfile profile;  // stdout, parsed
  std::string stderr_text;
};

// Waits `timeout` for a PyPerf started with -d to end by itself (killing it
// otherwise) and returns what it wrote; adds failures, traced with `what`, if
// it does not exit 0 or writes lines gProfiler could not read.
PyPerfRun FinishPyPerf(ChildProcess& pyperf, const std::string& what,
                       std::chrono::milliseconds timeout);

// Runs PyPerf with `args` (no -d: it runs until signalled) until, after it is
// ready, every process of `pids` has used `cpu` of CPU time (or `timeout`
// passes: a failure), then SIGTERMs it and returns what it wrote, as
// FinishPyPerf. A fixed duration would give a starved process no samples on
// a busy host; this gives each the same amount of running, however busy.
PyPerfRun ProfileUntilEachRan(const std::vector<std::string>& args, const std::vector<pid_t>& pids,
                              std::chrono::milliseconds cpu, const std::string& what,
                              std::chrono::milliseconds timeout = std::chrono::minutes(5));

// PyPerf's dump lines on stderr so far ("PyPerf: samples collected: ...").
std::vector<std::string> DumpLines(const ChildProcess& pyperf);
// Sends SIGUSR2 and waits for the dump line it brings; nullopt if none came
// within `timeout` or PyPerf ended.
std::optional<std::string> RequestDump(ChildProcess& pyperf, std::chrono::milliseconds timeout);
// The files named PATH.<anything>, sorted by name (as gProfiler sorts them).
std::vector<std::string> DumpedFiles(const std::string& path);
// The file a dump line names ("output: PATH"); empty if it names none.
std::string DumpOutputPath(const std::string& dump_line);

// The sum of counter `name` over the dump lines PyPerf printed on stderr
// ("PyPerf: samples collected: N, ..., name: N, ..."); nullopt if no dump
// line has it.
std::optional<uint64_t> DumpCounter(const std::string& stderr_text, const std::string& name);

// Checks that at least `min_percent` of the samples of `lines` satisfy `pred`
// (PyPerf's promise for them, stated by the caller), printing the figure; on
// failure, or when there are no samples, the message names `what` and shows
// lines that do not. Returns the share in percent.
double ExpectShareOfSamples(const std::vector<CollapsedLine>& lines,
                            const std::function<bool(const CollapsedLine&)>& pred,
                            double min_percent, const std::string& what);

// A kernel frame of the system call entry (entry_SYSCALL* or do_syscall_64).
bool IsSyscallEntryFrame(const std::string& frame);

// For a thread looping on a system call. How much of its time it spends in
// the kernel is the machine's (its load, who holds the GIL); what PyPerf
// prints for the samples taken there is PyPerf's. Of `lines`, the samples
// with a system call entry frame must be at least min_in_call_percent of
// all (PyPerf dropping kernel frames would leave none), and at least
// min_percent of those must satisfy `pred`.
void ExpectSystemCallSamples(const std::vector<CollapsedLine>& lines,
                             const std::function<bool(const CollapsedLine&)>& pred,
                             double min_in_call_percent, double min_percent,
                             const std::string& what);

// ExpectShareOfSamples for stacks that end in the Python `functions` (from
// the root, when `rooted`: PythonStackEndsWith); returns the lines that do.
std::vector<CollapsedLine> ExpectShareEndingWith(const std::vector<CollapsedLine>& lines,
                                                 const std::vector<std::string>& functions,
                                                 bool rooted, double min_percent,
                                                 const std::string& what);

// Checks that at most `max_percent` of the samples of `lines` carry an error
// marker; on failure, shows some that do.
void ExpectFewErrorMarkers(const std::vector<CollapsedLine>& lines, double max_percent);

// The CPU time process `pid` has used (utime + stime), in clock ticks
// (sysconf(_SC_CLK_TCK) a second); 0 if it is gone. Tests wait on it for a
// workload to have run, however busy the machine.
uint64_t CpuTicks(pid_t pid);
// The same for thread `tid` of process `pid`.
uint64_t ThreadCpuTicks(pid_t pid, pid_t tid);
// Waits until process `pid` has used `cpu` more CPU time than now (true), or
// `timeout` passes (false): "the workload has run", on a machine
// however busy.
bool WaitForCpu(pid_t pid, std::chrono::milliseconds cpu,
                std::chrono::milliseconds timeout = std::chrono::seconds(60));

// Process `pid`'s resident memory (VmRSS) in KiB, and its open file
// descriptors; 0 if it is gone.
uint64_t VmRssKiB(pid_t pid);
size_t OpenFdCount(pid_t pid);

// The one thread of `pid` whose stacks contain a Python frame of `function`
// (of `class_name`, when given); nullopt, with a failure, unless exactly one
// thread does.
std::optional<pid_t> ThreadRunning(const CollapsedProfile& profile, pid_t pid,
                                   const std::string& function,
                                   const std::optional<std::string>& class_name);

// Checks that hold for every line PyPerf writes: frames in order, every
// Python frame spelled <module>.<Class.>function (<file>:<line>)_[p], and,
// with `every_frame_has_a_kind`, no frame without a kind suffix. Reports the
// first few problems.
void ExpectWellFormed(const std::vector<CollapsedLine>& lines, bool every_frame_has_a_kind = false);

// The first `max_lines` lines, one per line, for a failure message.
std::string Excerpt(const std::vector<CollapsedLine>& lines, size_t max_lines = 6);

}  // namespace pyperf_test
