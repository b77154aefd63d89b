// PyPerfProfiler: the sampling loop. Loads the BPF program, keeps the set of
// profiled Python processes current (rescanning /proc every update
// interval), turns each BPF event into one collapsed stack (Python frames,
// then native, then kernel) and hands it to the output, which dumps on
// SIGUSR2, at the end of --duration, and on SIGINT/SIGTERM. Every line it
// prints on stderr goes through a NonBlockingLineWriter: logging never stalls
// sampling or delays a dump, and the lines it drops are counted on the next
// dump line.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "FrameSpelling.h"
#include "ProfileOutput.h"
#include "PyPerfBpf.h"
#include "PyPerfOptions.h"
#include "PythonProcess.h"
#include "PythonStackDecoder.h"
#include "PythonSymbols.h"
#include "TrackedProcess.h"
#include "kallsyms.h"
#include "native_unwinder.h"
#include "nonblocking_line_writer.h"
#include "status.h"

namespace pyperf {

// The BPF program's parameters for a command line.
BpfConfig BpfConfigFor(const Options& options);

// Counters of one dump interval, printed on stderr with each dump.
struct IntervalCounters {
  uint64_t lost = 0;
  uint64_t truncated = 0;
  uint64_t symbol_errors = 0;
  uint64_t kernel_stack_errors = 0;
  // Kernel stacks freed when a map was emptied for a new generation (once a
  // second).
  uint64_t kernel_stacks_freed = 0;
  uint64_t native_stack_errors = 0;
  uint64_t sample_errors = 0;
  // Samples of tracked processes whose thread has no PyThreadState (a native
  // thread, or one not yet or no longer known to the interpreter): they carry
  // no Python frames, and this says so.
  uint64_t no_thread_state = 0;
  // Samples of a process that exec'd since PyPerf inspected it: printed
  // with "[Process Replaced]_[pe]" and no Python frames.
  uint64_t replaced = 0;
};

class PyPerfProfiler {
 public:
  static Result<std::unique_ptr<PyPerfProfiler>> Create(const Options& options);
  ~PyPerfProfiler();

  // Samples until the duration ends or SIGINT/SIGTERM arrives; dumps on
  // SIGUSR2. `on_ready` runs once sampling has begun, right before "Ready to
  // profile". Returns the process exit code.
  int Run(const std::function<void()>& on_ready = {});

  // Signal handlers set these (async-signal-safe).
  static void RequestDump();
  static void RequestStop();

 private:
  explicit PyPerfProfiler(const Options& options);
  Status Init();
  void UpdateProcesses();
  // Stops profiling pid: BPF, Python and native state.
  void ForgetProcess(pid_t pid);
  // True once kStopGrace has passed since OnEvent first saw the stop request.
  bool StopGraceOver();
  // Profiles an inspected process; `exec_time` is its PyPerfBpf::ExecTime,
  // read before the inspection began.
  void TrackProcess(const PythonProcessInfo& info, uint64_t exec_time);
  void OnEvent(const pyperf_event& event, size_t size);
  void AppendKernelFrames(const pyperf_event& event, StackText* stack);
  // Starts a new generation of kernel stack ids, in the map the generation
  // before the current one used (emptied first; the counter of freed stacks).
  void StartKernelStackGeneration();
  void AppendNativeFrames(const pyperf_event& event, size_t size, StackText* stack);
  Status Dump(bool final_dump = false);
  // Reads every event of every ring, then lets the symbol table forget the
  // ids no event in flight can name any more.
  void DrainEvents();
  void LogNativeRound();
  // -v 2, at each dump: the fill of every table keyed by what keeps changing
  // on the host (README, "Tables and their bounds").
  void LogTables();
  // "PyPerf: <message>" on stderr if -v is at least `level`.
  void Log(int level, const std::string& message);
  // "PyPerf: warning: <message>" and "PyPerf: error: <message>", at any -v.
  void Warn(const std::string& message);
  void Error(const std::string& message);

  NonBlockingLineWriter stderr_{STDERR_FILENO};
  // stderr_.dropped() when the last dump line was written: each dump line
  // reports the lines dropped since then, dropped dump lines included.
  uint64_t log_dropped_at_last_report_ = 0;

  Options options_;
  std::unique_ptr<PyPerfBpf> bpf_;
  std::unique_ptr<ProfileOutput> output_;
  PythonProcessInspector inspector_;
  std::unique_ptr<PythonSymbolTable> symbols_;  // before python_, which uses it
  std::unique_ptr<PythonStackDecoder> python_;
  uint64_t symbols_retired_at_last_dump_ = 0;
  std::unique_ptr<NativeUnwinder> native_;  // null with --user-stacks-pages 0
  std::vector<NativeFrame> native_frames_;  // reused: no allocation per sample
  std::string origin_key_;                  // reused: a native frame as spelled
  std::vector<uint64_t> kernel_addrs_;      // reused too
  // The current generation of kernel stack ids (the BPF program stamps each
  // event with its own): events of it and of the one before are readable.
  uint32_t kernel_stack_generation_ = 0;
  NativeUnwinderStats native_at_last_dump_;
  KernelSymbols kernel_symbols_;

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
  std::map<const pyperf_offsets*, uint32_t> layouts_;

  IntervalCounters counters_;
  // A process exec'd: rescan at the end of the round, not in the event loop.
  bool rescan_soon_ = false;
  // SIGTERM seen by OnEvent, and until when queued events are still printed.
  bool stop_seen_ = false;
  std::chrono::steady_clock::time_point stop_grace_end_;
  StackText scratch_;  // reused: no allocation per sample
  // Events OnEvent has read since start (the -v 4 rescan line tells how many
  // arrived while a rescan ran: it reads the rings between processes).
  uint64_t events_read_ = 0;
};

}  // namespace pyperf
