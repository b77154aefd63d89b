// ProcessTracker: see ProcessTracker.h.
#include "ProcessTracker.h"

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <set>
#include <string>

#include "PyDebugOffsets.h"
#include "PyOffsets.h"
#include "proc_maps.h"

namespace ebpf::pyperf {
namespace {

std::string ExePath(pid_t pid) {
  auto path = ReadProcessExePath(pid);
  return path.ok() ? *path : std::string();
}

// Rescans that look again at a process rejected just after its exec or
// start, before the dynamic linker had mapped everything.
constexpr int kYoungRejectionRetries = 3;
constexpr uint64_t kYoungProcessSeconds = 2;

// Whether a process started at `start_ticks` (clock ticks since boot) is
// younger than kYoungProcessSeconds.
bool StartedJustNow(uint64_t start_ticks) {
  struct timespec now {};
  if (clock_gettime(CLOCK_BOOTTIME, &now) != 0) return false;
  const uint64_t ticks = static_cast<uint64_t>(sysconf(_SC_CLK_TCK));
  const uint64_t now_ticks = static_cast<uint64_t>(now.tv_sec) * ticks +
                             static_cast<uint64_t>(now.tv_nsec) * ticks / 1000000000u;
  return now_ticks < start_ticks + kYoungProcessSeconds * ticks;
}

}  // namespace

ProcessTracker::ProcessTracker(std::vector<int> pids, PyPerfBpf* bpf, ProfilerLog* log,
                               ForgetListener on_forget)
    : pids_(std::move(pids)), bpf_(bpf), log_(log), on_forget_(std::move(on_forget)) {}

void ProcessTracker::Track(const PythonProcessInfo& info, uint64_t exec_time,
                           const std::string& exe) {
  auto reject = [&](const std::string& why) {
    rejected_[{info.pid, info.start_time}] = Rejection{exe, 0};
    std::string message = "not profiling pid " + std::to_string(info.pid) + ": " + why;
    // A pid named with -p that cannot be profiled is a warning.
    if (pids_.empty())
      log_->Log(0, message);
    else
      log_->Warn(message);
  };
  if (tracked_.size() >= PYPERF_MAX_PROCESSES) {
    // Full. Not remembered as rejected: looked at again at each rescan, and
    // profiled once others have exited.
    if (!warned_process_limit_) {
      log_->Warn("profiling " + std::to_string(tracked_.size()) +
                 " processes, the most PyPerf can: pid " + std::to_string(info.pid) +
                 " and any more are looked at again at each rescan, and profiled once others exit");
      warned_process_limit_ = true;
    }
    return;
  }
  // The version's table; from 3.13 on merged with the process's own _Py_DebugOffsets.
  auto resolved = OffsetsForProcess(info, async_tasks_);
  if (!resolved.ok()) {
    reject(resolved.error());
    return;
  }
  const pyperf_offsets* offsets = resolved->offsets;
  pyperf_proc_info proc = {};
  if (info.version.AtLeast(3, 7)) {
    if (!info.symbols.py_runtime || offsets->runtime_interp_main < 0) {
      reject("_PyRuntime not found in " + info.module.path);
      return;
    }
    proc.interp_addr = *info.symbols.py_runtime + offsets->runtime_interp_main;
  } else if (info.symbols.interp_head) {
    proc.interp_addr = *info.symbols.interp_head;
  } else if (info.symbols.auto_interpreter_state) {
    proc.interp_addr = *info.symbols.auto_interpreter_state;
  } else {
    reject("the interpreter list (interp_head) is not in " + info.module.path + "'s symbol table");
    return;
  }
  // PyCode_Type lets the BPF walker skip anything that is not a code object.
  if (info.symbols.py_code_type) proc.code_type = *info.symbols.py_code_type;
  proc.exec_time = exec_time;

  auto layout_it = layouts_.find(offsets);
  if (layout_it == layouts_.end()) {
    uint32_t index = static_cast<uint32_t>(layouts_.size());
    if (index >= PYPERF_MAX_LAYOUTS) {
      reject("too many distinct CPython layouts");
      return;
    }
    Status st = bpf_->SetLayout(index, *offsets);
    if (!st.ok()) {
      reject(st.message());
      return;
    }
    layout_it = layouts_.emplace(offsets, index).first;
  }
  proc.layout = layout_it->second;
  Status st = bpf_->AddProcess(info.pid, proc);
  if (!st.ok()) {
    reject(st.message());
    return;
  }
  TrackedProcess& tracked = tracked_[info.pid];
  tracked.pid = info.pid;
  tracked.start_time = info.start_time;
  tracked.exec_time = exec_time;
  tracked.version = info.version;
  tracked.offsets = offsets;
  tracked.offsets_source = resolved->source;
  log_->Log(1, "profiling pid " + std::to_string(info.pid) + " (CPython " +
                   info.version.ToString() + ", " + info.module.path +
                   ", offsets: " + resolved->source + ")");
  // Once per version and reason: a host may run thousands of such processes.
  if (async_tasks_ && offsets->tstate_running_task <= 0 &&
      async_unavailable_said_.insert(info.version.ToString() + resolved->asyncio_unavailable)
          .second)
    log_->Warn("CPython " + info.version.ToString() + " (pid " + std::to_string(info.pid) +
               " and any other like it): --async-tasks is not available: " +
               resolved->asyncio_unavailable + "; profiled without task frames");
}

void ProcessTracker::Forget(pid_t pid) {
  bpf_->RemoveProcess(pid);
  tracked_.erase(pid);
  on_forget_(pid);
}

void ProcessTracker::Replaced(pid_t pid) {
  Forget(pid);
  exec_seen_.insert(pid);
  rescan_asked_ = true;
}

size_t ProcessTracker::Rescan(const std::function<void()>& between_processes) {
  std::vector<pid_t> pids;
  if (!pids_.empty()) {
    for (int pid : pids_) pids.push_back(static_cast<pid_t>(pid));
  } else {
    pids = ListProcesses();
  }
  pid_t self = getpid();
  std::set<pid_t> alive;
  for (pid_t pid : pids) {
    if (pid == self) continue;
    // No iterator is held here: the callee may profile events.
    between_processes();
    const bool first_look = !pids_.empty() && looked_at_.insert(pid).second;
    auto start = ReadProcessStartTime(pid);
    if (!start.ok()) {  // gone, or not started yet
      // A -p pid missing at start is worth a warning; one that exited later is not.
      if (first_look) {
        // /proc, not kill(pid, 0): PyPerf sends nothing to any process.
        struct stat proc_dir;
        const bool exists = stat(("/proc/" + std::to_string(pid)).c_str(), &proc_dir) == 0;
        if (exists)
          log_->Warn("cannot read pid " + std::to_string(pid) + "'s start time (" + start.error() +
                     "); PyPerf keeps running and tries again at each rescan");
        else
          log_->Warn("pid " + std::to_string(pid) +
                     " does not exist; PyPerf keeps running and profiles it if it appears");
      }
      continue;
    }
    alive.insert(pid);
    auto it = tracked_.find(pid);
    if (it != tracked_.end()) {
      if (it->second.start_time == *start) continue;
      // The pid now names another process: forget everything about the old one.
      Forget(pid);
    }
    // exec keeps the pid and start time: a rejection holds for one executable.
    const std::string exe = ExePath(pid);
    auto rejected = rejected_.find({pid, *start});
    const bool looked_before = rejected != rejected_.end() && rejected->second.exe == exe;
    int retries = 0;
    if (looked_before) {
      if (rejected->second.retries == 0) continue;
      retries = rejected->second.retries - 1;
    }
    const bool just_exec = exec_seen_.erase(pid) > 0;
    if (just_exec || (!looked_before && StartedJustNow(*start))) retries = kYoungRejectionRetries;
    // Read before the process's files: an exec from here on makes its
    // samples `replaced`, whatever image the inspection saw.
    const uint64_t exec_time = bpf_->ExecTime(pid);
    auto info = inspector_.Inspect(pid, *start, exe);
    if (!info.ok()) {
      rejected_[{pid, *start}] = Rejection{exe, retries};
      // Right after an exec the new image may still be loading: look again
      // at the end of the next round rather than at the next rescan.
      if (just_exec) rescan_asked_ = true;
      if (!pids_.empty() && !looked_before && !just_exec)
        log_->Warn("not profiling pid " + std::to_string(pid) + ": " + info.error());
      else
        log_->Log(4, "pid " + std::to_string(pid) + " is not profiled: " + info.error());
      continue;
    }
    Track(*info, exec_time, exe);
  }
  for (auto it = tracked_.begin(); it != tracked_.end();) {
    if (alive.count(it->first)) {
      ++it;
      continue;
    }
    pid_t pid = it->first;
    ++it;
    Forget(pid);
    log_->Log(1, "pid " + std::to_string(pid) + " exited");
  }
  for (auto it = rejected_.begin(); it != rejected_.end();)
    it = alive.count(it->first.first) ? std::next(it) : rejected_.erase(it);
  for (auto it = exec_seen_.begin(); it != exec_seen_.end();)
    it = alive.count(*it) ? std::next(it) : exec_seen_.erase(it);
  return alive.size();
}

}  // namespace ebpf::pyperf
