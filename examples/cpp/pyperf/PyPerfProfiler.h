// PyPerfProfiler: the run loop. Loads the BPF program, has the process
// tracker (ProcessTracker.h) rescan every update interval, turns each BPF
// event into a Sample (SampleAssembler.h) counted by the output, runs each
// sampling round's aging (symbols, line tables, NativeStackTrace's caches),
// starts a new kernel stack generation each second, and dumps on SIGUSR2, at
// the end of --duration, and on SIGINT/SIGTERM, with a dump line of the
// interval's counters on stderr (ProfilerLog.h).
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

#include "KernelStackGenerations.h"
#include "ProcessTracker.h"
#include "ProfileOutput.h"
#include "ProfilerLog.h"
#include "PyPerfBpf.h"
#include "PyPerfOptions.h"
#include "PythonStackDecoder.h"
#include "PythonSymbols.h"
#include "Sample.h"
#include "SampleAssembler.h"
#include "kallsyms.h"
#include "native_unwinder.h"
#include "status.h"

namespace ebpf::pyperf {

// The BPF program's parameters for a command line.
BpfConfig BpfConfigFor(const Options& options);

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
  // A rescan by the tracker, reading the rings between processes.
  void Rescan();
  // True once kStopGrace has passed since OnEvent first saw the stop request.
  bool StopGraceOver();
  void OnEvent(const pyperf_event& event, size_t size);
  // Starts a new generation of kernel stack ids (every event read first).
  void StartKernelStackGeneration();
  Status Dump(bool final_dump = false);
  // Reads every event of every ring, then lets the symbol table forget the
  // ids no event in flight can name any more.
  void DrainEvents();
  void LogNativeRound();
  // -v 2, at each dump: the fill of every table keyed by what keeps changing
  // on the host (README, "Tables and their bounds").
  void LogTables();

  Options options_;
  ProfilerLog log_;
  // log_.dropped() when the last dump line was written: each dump line
  // reports the lines dropped since then, dropped dump lines included.
  uint64_t log_dropped_at_last_report_ = 0;

  std::unique_ptr<PyPerfBpf> bpf_;
  std::unique_ptr<ProfileOutput> output_;
  std::unique_ptr<PythonSymbolTable> symbols_;  // before python_, which uses it
  std::unique_ptr<PythonStackDecoder> python_;
  uint64_t symbols_retired_at_last_dump_ = 0;
  KernelSymbols kernel_symbols_;
  std::unique_ptr<KernelStackGenerations> kernel_stacks_;
  std::unique_ptr<SampleAssembler> assembler_;
  std::unique_ptr<ProcessTracker> tracker_;
  Sample sample_;  // reused: no allocation per sample
  NativeUnwinderStats native_at_last_dump_;

  // The run loop's counters of a dump interval (the assembler has its own).
  uint64_t lost_ = 0;
  uint64_t kernel_stacks_freed_ = 0;
  // SIGTERM seen by OnEvent, and until when queued events are still printed.
  bool stop_seen_ = false;
  std::chrono::steady_clock::time_point stop_grace_end_;
  // Events OnEvent has read since start (the -v 4 rescan line tells how many
  // arrived while a rescan ran: it reads the rings between processes).
  uint64_t events_read_ = 0;
};

}  // namespace ebpf::pyperf
