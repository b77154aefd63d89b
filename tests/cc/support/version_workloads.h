// One workload script started on every host and container interpreter of
// version_targets.h (pyenv 2.7 .. 3.13, Debian's static 3.11, trixie's 3.13,
// sid's 3.14 and 3.15) and on the free-threaded 3.13t, all at once, for the
// tests that check every version under one PyPerf (test_e2e_code_reuse.cc,
// test_e2e_interleaved.cc). Each runs in a directory of its own (inside its
// root for a container), where the test may put files before it starts.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support/e2e.h"
#include "support/python_roots.h"
#include "support/test_support.h"

namespace pyperf_test {

struct VersionWorkload {
  std::string name;                // the target's name
  std::string unavailable;         // why it cannot run here; "" when it runs
  std::optional<PythonRoot> root;  // a container's root
  // The workload's directory: a container's inside its root. Declared before
  // the process, so that the process dies first.
  std::unique_ptr<RootTempDir> root_dir;
  std::unique_ptr<TempDir> host_dir;
  std::unique_ptr<ChildProcess> process;
  std::string dir;         // the directory as the host sees it
  std::string dir_inside;  // ... as the process sees it
  std::string python;      // the interpreter, as the process sees it
  std::string script;      // the workload's path, as the process sees it
  pid_t pid = 0;           // the interpreter's host pid, once ready

  bool container() const { return root.has_value(); }
  // argv that runs `args` (a path as the process sees it first) where the
  // workload runs: on the host, or in its container.
  std::vector<std::string> Argv(const std::vector<std::string>& args) const;
};

// The arguments after the script for one workload, whose directory exists
// (empty optional: it cannot run, `unavailable` says why).
using WorkloadArgs = std::function<std::optional<std::vector<std::string>>(VersionWorkload*)>;

// Starts `script` (a file of tests/cc/workloads, copied into each workload's
// directory) on every version; those that cannot run say why.
std::vector<std::unique_ptr<VersionWorkload>> StartOnEveryVersion(const std::string& script,
                                                                  const WorkloadArgs& args);

// A failure in strict mode (else a printed skip) for each workload that cannot
// run; false if none can.
bool ReportUnavailable(const std::vector<std::unique_ptr<VersionWorkload>>& workloads);

// Waits `timeout` for every started workload's "ready" line and finds its host pid (a
// container's: unshare's one child). A workload that does not get there, or
// whose `check` (given its stdout; "" = fine) fails, is a failure and is
// stopped (its process reset).
void WaitUntilReady(std::vector<std::unique_ptr<VersionWorkload>>& workloads,
                    const std::function<std::string(VersionWorkload*)>& check,
                    std::chrono::seconds timeout = kWorkloadReadyTimeout);

// Starts PyPerf with `args` and a -p for every workload running, waits for
// it to be ready, releases the workloads (SIGUSR1) and waits up to `deadline`
// for each to print `done` (a test failure if one does not, or if PyPerf
// ends). Returns PyPerf, still running; null (a test failure) if it never
// got ready or no workload runs.
std::unique_ptr<ChildProcess> ProfileReleasedWorkloads(
    std::vector<std::string> args, const std::vector<std::unique_ptr<VersionWorkload>>& workloads,
    const std::string& done, std::chrono::seconds deadline);
// The same with one PyPerf per element of `runs` (its arguments), all
// profiling the workloads at the same time; empty (a test failure) if one
// never got ready or no workload runs.
std::vector<std::unique_ptr<ChildProcess>> ProfileReleasedWorkloads(
    const std::vector<std::vector<std::string>>& runs,
    const std::vector<std::unique_ptr<VersionWorkload>>& workloads, const std::string& done,
    std::chrono::seconds deadline);

// Whether the workload's stdout holds `text`.
bool Printed(const VersionWorkload& w, const std::string& text);

}  // namespace pyperf_test
