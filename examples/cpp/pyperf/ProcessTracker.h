// ProcessTracker: which Python processes PyPerf profiles (the -p pids, or
// every process at each rescan), what it hands the BPF program for each (its
// interpreter's address, its layout, the exec time read before inspecting
// it), the processes it rejected and why, and forgetting a process that
// exited, exec'd or whose pid now names another one. Each process's identity
// (pid, start time, exec time) is recorded at inspection; each /proc fact
// the rescan uses is read once per process and rescan.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ProfilerLog.h"
#include "PyPerfBpf.h"
#include "PythonProcess.h"
#include "TrackedProcess.h"

namespace ebpf::pyperf {

class ProcessTracker {
 public:
  // Told of every pid the tracker stops profiling, after the BPF program was.
  using ForgetListener = std::function<void(pid_t)>;

  // `pids`: the -p pids (empty: every process). `bpf` and `log` outlive it.
  ProcessTracker(std::vector<int> pids, PyPerfBpf* bpf, ProfilerLog* log, ForgetListener on_forget);

  // --async-tasks: a process whose offsets have no asyncio task layout is
  // profiled as without it, and one warning line per version says so.
  void set_async_tasks(bool async_tasks) { async_tasks_ = async_tasks; }

  // Looks at every process again: profiles new Python processes, forgets
  // those that exited. `between_processes` runs before each process is read
  // (the run loop reads the perf rings: a rescan of a busy host can outlast
  // their headroom). Returns how many processes were alive.
  size_t Rescan(const std::function<void()>& between_processes);

  // The profiled process of `pid`, or null.
  const TrackedProcess* Find(pid_t pid) const {
    auto it = tracked_.find(pid);
    return it == tracked_.end() ? nullptr : &it->second;
  }

  // A sample showed that `pid` exec'd since it was inspected: it is forgotten
  // now, and inspected again at the next Rescan (rescan_asked() says one is due).
  void Replaced(pid_t pid);
  // Whether an exec asks for a rescan before the next periodic one.
  bool rescan_asked() const { return rescan_asked_; }
  void clear_rescan_asked() { rescan_asked_ = false; }

  size_t tracked() const { return tracked_.size(); }
  size_t rejected() const { return rejected_.size(); }
  size_t layouts() const { return layouts_.size(); }

 private:
  // Profiles an inspected process; `exec_time` is its PyPerfBpf::ExecTime,
  // read before the inspection began; `exe` its executable then.
  void Track(const PythonProcessInfo& info, uint64_t exec_time, const std::string& exe);
  void Forget(pid_t pid);

  std::vector<int> pids_;
  PyPerfBpf* bpf_;
  bool async_tasks_ = false;
  ProfilerLog* log_;
  ForgetListener on_forget_;
  PythonProcessInspector inspector_;

  std::map<pid_t, TrackedProcess> tracked_;
  // (pid, start time) not profiled -> the executable it had then, and how
  // many more rescans look at it again anyway: a process inspected right
  // after its exec or start may not have mapped libpython yet.
  struct Rejection {
    std::string exe;
    int retries = 0;
  };
  std::map<std::pair<pid_t, uint64_t>, Rejection> rejected_;
  // Pids whose exec PyPerf saw since they were last inspected.
  std::set<pid_t> exec_seen_;
  // -p pids looked at once: only the first look warns about a missing pid.
  std::set<pid_t> looked_at_;
  bool warned_process_limit_ = false;  // py_procs full: said once
  // --async-tasks not available: said once per version and reason (bounded by
  // the versions and builds PyPerf knows).
  std::set<std::string> async_unavailable_said_;
  std::map<const pyperf_offsets*, uint32_t> layouts_;
  bool rescan_asked_ = false;
};

}  // namespace ebpf::pyperf
