// PyPerfBpf: owns PyPerf's loaded BPF program (PyPerfBPFProgram.c) and its
// maps: compiles it headerlessly with the run's parameters, wires the tail
// calls, samples its own thread with the program's kernel-offset check,
// watches every exec, attaches it to the CPU-clock event on every CPU, and
// gives typed access to the maps user space fills (kernel offsets, processes,
// offset tables) and reads (events, exec times, symbols, kernel stacks).
#pragma once

#include <bcc/BPF.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "PyPerfBpfShared.h"
#include "perf_output_rings.h"
#include "status.h"

namespace ebpf::pyperf {

// The program's parameters. A run takes them from its command line
// (BpfConfigFor in PyPerfProfiler.h), where their defaults are set.
struct BpfConfig {
  uint32_t user_stack_pages = 0;
  uint32_t symbols_map_size = 0;
  uint32_t kernel_stacks_map_size = 0;
  uint32_t events_buffer_pages = 0;
  // bpf_probe_read_user/_kernel (true) or bpf_probe_read (false, kernels
  // before 5.5); unset: whichever the running kernel has.
  std::optional<bool> probe_read_user;
  // --async-tasks: the program reads each sample's asyncio task chain.
  bool async_tasks = false;
  // Exactly one of the two is non-zero.
  uint64_t sample_period_ns = 0;
  uint64_t sample_frequency = 0;
};

// The BPF program text PyPerf compiles: the shared header and the program.
std::string PyPerfBpfProgramText();

// How the start-up check samples the calling thread: every period_ns of its
// CPU time until min_user_samples samples hit user mode, or until the
// deadline (wall time) passes on a host too busy to run the thread.
struct OffsetCheckSampling {
  uint64_t period_ns = 50000;
  uint64_t min_user_samples = 4;
  std::chrono::milliseconds deadline{50};
};

class PyPerfBpf {
 public:
  using EventCallback = std::function<void(const pyperf_event& event, size_t size)>;
  using LostCallback = std::function<void(uint64_t lost)>;

  static Result<std::unique_ptr<PyPerfBpf>> Load(const BpfConfig& config);
  ~PyPerfBpf();
  PyPerfBpf(const PyPerfBpf&) = delete;
  PyPerfBpf& operator=(const PyPerfBpf&) = delete;

  // Samples the calling thread with check_kernel_offsets, which reads what
  // `input` names at every sample; returns what it saw, per candidate.
  Result<std::vector<pyperf_offset_check_result>> SampleOffsetCheck(
      const pyperf_offset_check_input& input, const OffsetCheckSampling& sampling);
  // The task_struct offsets on_sample reads at; set before Attach.
  Status SetKernelOffsets(const pyperf_kernel_offsets& offsets);

  Status SetLayout(uint32_t index, const pyperf_offsets& offsets);
  // When `pid` last exec'd since the program was loaded (0: not seen, or
  // forgotten by the LRU): read before a process is inspected, and stored in
  // its pyperf_proc_info, so its samples say whether they come from a later exec.
  uint64_t ExecTime(pid_t pid);
  Status AddProcess(pid_t pid, const pyperf_proc_info& info);
  void RemoveProcess(pid_t pid);

  // Opens the per-CPU event rings, each waking Poll only once half of it is
  // written (a watermark in bytes), and read with no system call per
  // event: user space wakes a bounded number of times a second whatever the
  // sampling rate.
  Status OpenEvents(EventCallback on_event, LostCallback on_lost);
  Status Attach();
  void Detach();
  // Waits at most timeout_ms for a ring to cross its watermark, then reads
  // every event of every ring; with timeout 0, reads them at once, with no
  // system call. Returns the rings that woke, or -1 (errno EINTR: a signal).
  int Poll(int timeout_ms);
  // The bytes written to a ring that wake Poll.
  size_t wakeup_bytes() const { return events_ ? events_->wakeup_bytes() : 0; }
  // Wake-ups so far.
  uint64_t wakeups() const { return events_ ? events_->wakeups() : 0; }

  // The symbol interned under `id`, if any.
  std::optional<pyperf_symbol> LookupSymbol(int32_t id);
  // Deletes `id` from both symbol maps (its key only while it still maps to
  // `id`); true if symbol_by_id held it.
  bool RetireSymbol(int32_t id);
  // Each CPU's count of symbols it put into the maps.
  std::optional<std::vector<uint64_t>> InternedSymbols();
  // Python frames named from the code object cache (code_symbols) and by
  // copying their strings, since the start (all CPUs).
  struct CodeCacheCounts {
    uint64_t hits = 0, misses = 0;
  };
  CodeCacheCounts CodeCache();
  // Every id symbol_by_id holds (a walk of the map).
  std::vector<int32_t> SymbolIds();
  // How full the maps keyed by what keeps changing on a host are: entries
  // counted by a walk of each map (a system call per entry: for -v 2 logs
  // at dumps, not for the sampling path), against their bounds.
  struct MapFill {
    size_t py_procs = 0, py_procs_max = 0;
    size_t thread_states = 0, thread_states_max = 0;
  };
  MapFill ReadMapFill();
  // The kernel return addresses of a stack id taken in `generation` (which
  // names its map), innermost first, into *out (replaced; no allocation once
  // it has room). False if the map holds no such id.
  bool ReadKernelStack(uint32_t generation, int32_t stack_id, std::vector<uint64_t>* out);
  // Empties the kernel stacks map `next_generation` will fill (the one of the
  // generation before the current: every event of it must have been read),
  // then sets the generation the BPF program stamps on its events from now
  // on (pyperf_event's kernel_stack_generation). The current generation's
  // map is left alone, so its events in flight stay readable. Returns how
  // many stacks were freed.
  Result<size_t> StartKernelStackGeneration(uint32_t next_generation);

 private:
  // Each CPU's value of one slot of symbol_counter.
  std::optional<std::vector<uint64_t>> SymbolCounter(uint32_t slot);
  explicit PyPerfBpf(const BpfConfig& config) : config_(config) {}
  static void HandleEvent(void* cookie, void* data, int size);
  static void HandleLost(void* cookie, uint64_t lost);

  BpfConfig config_;
  std::unique_ptr<ebpf::BPF> bpf_;
  std::unique_ptr<PerfOutputRings> events_;  // before bpf_ goes: it is in bpf_'s map
  EventCallback on_event_;
  LostCallback on_lost_;
  bool attached_ = false;
  int kernel_stacks_fd_[2] = {-1, -1};     // even, odd generations; owned by bpf_
  ebpf::stacktrace_t kernel_stack_;        // the last stack read
  std::vector<int32_t> kernel_stack_ids_;  // StartKernelStackGeneration's scratch
};

}  // namespace ebpf::pyperf
