// PyPerfProfiler: see PyPerfProfiler.h.
#include "PyPerfProfiler.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string_view>

#include "FrameSpelling.h"
#include "KernelOffsetCheck.h"
#include "NativeStackTrace.h"
#include "btf_offsets.h"
#include "compiler_memory.h"
#include "scoped_priority.h"

namespace ebpf::pyperf {
namespace {

std::atomic<bool> g_dump_requested{false};
std::atomic<bool> g_stop_requested{false};

// After SIGTERM, how long queued events are still symbolized (the rest are
// counted as lost): the final dump comes within about this of the signal.
constexpr auto kStopGrace = std::chrono::milliseconds(1000);
// The sampling round: the perf rings are read at least this often (more
// often when a ring crosses its watermark first), and the caches age once per
// round.
constexpr int kRoundMs = 100;
// --native-frames interleaved: native frames one unwind may give (a deep
// stack of Python calls through C is several hundred).
constexpr size_t kInterleavedMaxNativeFrames = 1024;
// -v 3 logs the native unwinder's counters at most this often. A line per
// round (ten a second) would be ~17 KB/s, while
// gProfiler reads 64 KiB of stderr per cycle: PyPerf would block on the
// full pipe, lose samples, and could miss a dump.
constexpr auto kNativeLogInterval = std::chrono::seconds(1);
// How often the kernel stacks map is emptied: its ids are never reused while
// held, so without this a map filled once would lose every new stack.
constexpr auto kKernelStacksClearInterval = std::chrono::seconds(1);

}  // namespace

void PyPerfProfiler::RequestDump() { g_dump_requested = true; }
void PyPerfProfiler::RequestStop() { g_stop_requested = true; }

PyPerfProfiler::PyPerfProfiler(const Options& options)
    : options_(options), log_(options.verbosity) {}
PyPerfProfiler::~PyPerfProfiler() = default;

BpfConfig BpfConfigFor(const Options& options) {
  BpfConfig config;
  config.user_stack_pages = options.user_stacks_pages;
  config.symbols_map_size = options.symbols_map_size;
  config.kernel_stacks_map_size = options.kernel_stacks_map_size;
  config.events_buffer_pages = options.events_buffer_pages;
  config.async_tasks = options.async_tasks;
  if (options.sample_mode == SampleMode::kFrequency)
    config.sample_frequency = options.sample_frequency_hz;
  else
    config.sample_period_ns = options.sample_period_ns;
  return config;
}

Result<std::unique_ptr<PyPerfProfiler>> PyPerfProfiler::Create(const Options& options) {
  std::unique_ptr<PyPerfProfiler> profiler(new PyPerfProfiler(options));
  Status st = profiler->Init();
  if (!st.ok()) return st;
  return profiler;
}

Status PyPerfProfiler::Init() {
  output_ = std::make_unique<ProfileOutput>(options_.output_path, stdout, options_.formats);
  output_->set_sample_period_ns(options_.sample_mode == SampleMode::kFrequency
                                    ? 1000000000 / options_.sample_frequency_hz
                                    : options_.sample_period_ns);

  const BpfConfig config = BpfConfigFor(options_);

  // The program is compiled once; the task_struct offsets it reads are
  // checked against the running kernel with it, then stored in its map.
  KernelOffsetFlags flags;
  flags.fs_offset = options_.fs_offset;
  flags.stack_offset = options_.stack_offset;
  auto check = [&](const std::vector<KernelOffsets>& candidates) -> Result<OffsetCheckRun> {
    auto bpf = PyPerfBpf::Load(config);
    if (!bpf.ok()) return bpf.status();
    bpf_ = std::move(*bpf);
    return CheckKernelOffsets(*bpf_, candidates);
  };
  auto offsets = ChooseKernelOffsets(flags, ReadKernelOffsets(), check);
  if (!offsets.ok()) return offsets.status();
  if (!bpf_) return Status::Error("the BPF program was not loaded");
  if (!offsets->warning.empty()) fprintf(stderr, "PyPerf: warning: %s\n", offsets->warning.c_str());
  log_.Log(2, offsets->summary);
  Status stored = bpf_->SetKernelOffsets(offsets->offsets);
  if (!stored.ok()) return stored;

  PyPerfBpf* raw_bpf = bpf_.get();
  PythonSymbolTable::Maps maps;
  maps.lookup = [raw_bpf](int32_t id) { return raw_bpf->LookupSymbol(id); };
  maps.retire = [raw_bpf](int32_t id) { return raw_bpf->RetireSymbol(id); };
  maps.interned = [raw_bpf] { return raw_bpf->InternedSymbols(); };
  maps.ids = [raw_bpf] { return raw_bpf->SymbolIds(); };
  PythonSymbolTable::Limits symbol_limits;
  symbol_limits.capacity = options_.symbols_map_size;
  symbols_ = std::make_unique<PythonSymbolTable>(std::move(maps), symbol_limits);
  python_ = std::make_unique<PythonStackDecoder>(symbols_.get(),
                                                 options_.line_numbers == LineNumberMode::kCurrent);

  if (options_.user_stacks_pages > 0) {
    NativeUnwinderOptions native;
    // The interpreter's eval loop is the outermost native frame printed: what
    // lies below it belongs to the Python frames already shown.
    native.stop_symbols = {"_PyEval_EvalFrameDefault", "PyEval_EvalFrameEx"};
    if (options_.native_frames == NativeFramesMode::kInterleaved) {
      // The whole stack, as copied at the sample (never read later), each
      // eval-loop frame marked for the Python frames that replace it.
      native.walk_past_stop_symbols = true;
      native.stack_copy_only = true;
      native.max_depth = kInterleavedMaxNativeFrames;
    }
    native.cache_enabled = options_.native_cache;
    native.insert_dso_name = options_.insert_dso_name;
    native.name_cache_limits.max_entries = options_.native_cache_entries;
    native.name_cache_limits.max_bytes = options_.native_cache_bytes;
    native.name_cache_limits.max_age_rounds = options_.native_cache_max_age;
    native.module_cache_limits.max_age_rounds = options_.native_cache_max_age;
    native.process_max_age_rounds = options_.native_cache_max_age;
    NativeStackTrace::Configure(native);
  }

  auto ksyms = KernelSymbols::Load();
  if (ksyms.ok()) {
    kernel_symbols_ = std::move(*ksyms);
  } else {
    log_.Log(0, "kernel frames will be unnamed: " + ksyms.error());
  }
  kernel_stacks_ = std::make_unique<KernelStackGenerations>(bpf_.get());
  assembler_ =
      std::make_unique<SampleAssembler>(python_.get(), kernel_stacks_.get(), &kernel_symbols_);
  assembler_->set_interleaved(options_.native_frames == NativeFramesMode::kInterleaved);
  assembler_->set_async_tasks(options_.async_tasks);
  SampleAssembler* assembler = assembler_.get();
  tracker_ = std::make_unique<ProcessTracker>(
      options_.pids, bpf_.get(), &log_, [assembler](pid_t pid) { assembler->ForgetProcess(pid); });
  tracker_->set_async_tasks(options_.async_tasks);

  Status st = bpf_->OpenEvents([this](const pyperf_event& e, size_t size) { OnEvent(e, size); },
                               [this](uint64_t lost) { lost_ += lost; });
  if (!st.ok()) return st;
  return Status::Ok();
}

void PyPerfProfiler::DrainEvents() {
  bpf_->Poll(0);
  symbols_->AfterFullDrain();
}

void PyPerfProfiler::StartKernelStackGeneration() {
  // Every event taken so far is read first: those of the generation before
  // the current one (a second old by now) are all read before their map is
  // emptied for the next generation. The current generation's map is not
  // touched, so no event is lost to the change.
  DrainEvents();
  auto freed = kernel_stacks_->StartNext();
  if (!freed.ok()) {
    log_.Warn(freed.error());
    return;
  }
  kernel_stacks_freed_ += *freed;
}

void PyPerfProfiler::Rescan() {
  const uint64_t events_before = events_read_;
  // Reading the rings between processes costs no system call.
  const size_t alive = tracker_->Rescan([this] { DrainEvents(); });
  log_.Log(4, "rescan: " + std::to_string(alive) + " processes alive, " +
                  std::to_string(tracker_->tracked()) + " profiled, " +
                  std::to_string(events_read_ - events_before) + " events read during it");
}

void PyPerfProfiler::LogTables() {
  const PyPerfBpf::MapFill fill = bpf_->ReadMapFill();
  std::string line =
      "tables: py_procs " + std::to_string(fill.py_procs) + " of " +
      std::to_string(fill.py_procs_max) + ", thread_states " + std::to_string(fill.thread_states) +
      " of " + std::to_string(fill.thread_states_max) + ", tracked " +
      std::to_string(tracker_->tracked()) + ", rejected " + std::to_string(tracker_->rejected()) +
      ", layouts " + std::to_string(tracker_->layouts()) + " of " +
      std::to_string(PYPERF_MAX_LAYOUTS) + ", line tables " +
      std::to_string(python_->line_tables()) + " (" + std::to_string(python_->line_table_bytes()) +
      " bytes)";
  if (const NativeUnwinder* native = NativeStackTrace::unwinder()) {
    const NativeUnwinderStats n = native->stats();
    line += ", native names " + std::to_string(n.names.entries) + " (" +
            std::to_string(n.names.bytes) + " bytes), native files " +
            std::to_string(n.modules.entries) + ", native process states " +
            std::to_string(n.processes);
  }
  log_.Log(2, line);
}

void PyPerfProfiler::LogNativeRound() {
  NativeUnwinderStats st = NativeStackTrace::unwinder()->stats();
  char buf[320];
  snprintf(buf, sizeof(buf),
           "round %llu: native unwinds %llu, frames %llu, errors %llu; name cache hits %llu, "
           "misses %llu, entries %zu, bytes %zu, evictions %llu; modules %zu; processes %zu",
           (unsigned long long)st.rounds, (unsigned long long)st.unwinds,
           (unsigned long long)st.frames, (unsigned long long)st.errors,
           (unsigned long long)st.names.hits, (unsigned long long)st.names.misses, st.names.entries,
           st.names.bytes, (unsigned long long)st.names.evictions, st.modules.entries,
           st.processes);
  log_.Log(3, buf);
}

bool PyPerfProfiler::StopGraceOver() {
  auto now = std::chrono::steady_clock::now();
  if (!stop_seen_) {
    stop_seen_ = true;
    stop_grace_end_ = now + kStopGrace;
  }
  return now >= stop_grace_end_;
}

void PyPerfProfiler::OnEvent(const pyperf_event& event, size_t size) {
  ++events_read_;
  // After SIGTERM, the events still queued are symbolized for kStopGrace at
  // most and the rest count as lost: PyPerf exits with its final dump in
  // time however far behind an overload left it.
  if (g_stop_requested && StopGraceOver()) {
    ++lost_;
    return;
  }
  const TrackedProcess* process = tracker_->Find(static_cast<pid_t>(event.pid));
  if (!process) return;  // dropped since the event was sent
  if (event.replaced) {
    // An exec since the inspection: forgotten now (its native state is read
    // anew for this very sample), inspected again at the end of the round.
    const TrackedProcess replaced = *process;
    tracker_->Replaced(replaced.pid);
    assembler_->Assemble(event, size, replaced, &output_->dictionary(), &sample_);
  } else {
    assembler_->Assemble(event, size, *process, &output_->dictionary(), &sample_);
  }
  output_->Add(sample_);
}

Status PyPerfProfiler::Dump(bool final_dump) {
  auto info = final_dump ? output_->FinalDump() : output_->Dump();
  if (!info.ok()) return info.status();
  // The interval's stacks are gone: give the heap they took back to the
  // system, so RSS follows what PyPerf holds, not the busiest interval yet
  // (once a dump, a walk of the free lists: about a millisecond).
  malloc_trim(0);
  const uint64_t log_dropped = log_.dropped();
  const SampleCounters& counters = assembler_->counters();
  const PythonSymbolTable::Stats& symbols = symbols_->stats();
  char line[640];
  snprintf(line, sizeof(line),
           "samples collected: %llu, lost: %llu, truncated: %llu, symbol errors: %llu, "
           "kernel stack errors: %llu, kernel stacks freed: %llu, symbols retired: %llu, "
           "symbols in map: %llu, native stack errors: %llu, "
           "sample errors: %llu, no thread state: %llu, replaced processes: %llu, "
           "log lines dropped: %llu, processes: %zu, output: %s",
           (unsigned long long)info->samples, (unsigned long long)lost_,
           (unsigned long long)counters.truncated, (unsigned long long)counters.symbol_errors,
           (unsigned long long)counters.kernel_stack_errors,
           (unsigned long long)kernel_stacks_freed_,
           (unsigned long long)(symbols.retired - symbols_retired_at_last_dump_),
           (unsigned long long)symbols.in_maps, (unsigned long long)counters.native_stack_errors,
           (unsigned long long)counters.sample_errors, (unsigned long long)counters.no_thread_state,
           (unsigned long long)counters.replaced,
           (unsigned long long)(log_dropped - log_dropped_at_last_report_), tracker_->tracked(),
           info->file.empty() ? "stdout" : info->file.c_str());
  std::string native_line;
  if (const NativeUnwinder* native = NativeStackTrace::unwinder()) {
    NativeUnwinderStats now = native->stats();
    const CacheStats& n = now.names;
    const CacheStats& last = native_at_last_dump_.names;
    uint64_t hits = n.hits - last.hits, misses = n.misses - last.misses;
    char buf[320];
    snprintf(buf, sizeof(buf),
             ", native cache: %s, hits: %llu, misses: %llu, hit rate: %.4f, entries: %zu, "
             "bytes: %zu, evictions: %llu",
             native->cache_enabled() ? "on" : "off", (unsigned long long)hits,
             (unsigned long long)misses,
             hits + misses ? static_cast<double>(hits) / static_cast<double>(hits + misses) : 0.0,
             n.entries, n.bytes, (unsigned long long)(n.evictions - last.evictions));
    native_line = buf;
    if (options_.native_frames == NativeFramesMode::kLeaf) {
      snprintf(buf, sizeof(buf), ", eval loop not found: %llu",
               (unsigned long long)counters.eval_loop_not_found);
      native_line += buf;
    } else if (options_.native_frames == NativeFramesMode::kInterleaved) {
      snprintf(buf, sizeof(buf), ", native stack copy ended: %llu, unpaired eval loop frames: %llu",
               (unsigned long long)counters.interleave.copy_ended,
               (unsigned long long)counters.interleave.unpaired);
      native_line += buf;
    }
    native_at_last_dump_ = now;
  }
  if (options_.async_tasks) {
    char buf[96];
    snprintf(buf, sizeof(buf), ", task samples: %llu, task errors: %llu",
             (unsigned long long)counters.task_samples, (unsigned long long)counters.task_errors);
    native_line += buf;
  }
  // A dropped dump line leaves its count to the next one.
  if (log_.WriteLine({"PyPerf: ", line, native_line})) log_dropped_at_last_report_ = log_dropped;
  // Delivered, but no fresh PATH for the next interval (the next dump retries).
  if (!info->warning.empty()) log_.Warn(info->warning);
  if (options_.verbosity >= 2) {
    const PyPerfBpf::CodeCacheCounts code = bpf_->CodeCache();
    log_.Log(2, "symbols: in map " + std::to_string(symbols.in_maps) + " of " +
                    std::to_string(options_.symbols_map_size) + ", cached " +
                    std::to_string(symbols.cached) + ", new a round (peak) " +
                    std::to_string(symbols.peak_per_round) + ", retired " +
                    std::to_string(symbols.retired) + " (never named " +
                    std::to_string(symbols.unknown) + "), map walks " +
                    std::to_string(symbols.walks) + "; code objects: frames named from the cache " +
                    std::to_string(code.hits) + ", by their strings " +
                    std::to_string(code.misses));
  }
  if (options_.verbosity >= 2) LogTables();
  assembler_->counters() = SampleCounters{};
  lost_ = 0;
  kernel_stacks_freed_ = 0;
  symbols_retired_at_last_dump_ = symbols.retired;
  return Status::Ok();
}

int PyPerfProfiler::Run(const std::function<void()>& on_ready) {
  using Clock = std::chrono::steady_clock;
  // SIGINT/SIGTERM while the BPF program was loading: nothing was sampled,
  // and the stop is honoured at once (the last dump is empty).
  const bool stopped_early = g_stop_requested;
  Status st;
  if (!stopped_early) {
    Rescan();
    st = bpf_->Attach();
    if (!st.ok()) {
      log_.Error(st.message());
      return 1;
    }
    // Nothing is compiled from here on: the compiler's pages and heap go.
    const ReleasedMemory released = ReleaseCompilerMemory();
    log_.Log(2, "released " + std::to_string(released.compiler_text_bytes >> 20) +
                    " MiB of the BPF compiler's code pages (" + std::to_string(released.mappings) +
                    " mappings) and the compile's free heap");
  }
  // A SIGUSR2 before the output file existed asked for an interval that had
  // not begun: the first dump is the first one requested once ready.
  g_dump_requested = false;
  // gProfiler takes the file's appearance to mean "sampling, ready for
  // SIGUSR2": create it only once samples flow, so its first interval holds
  // samples. (Loading BPF takes about half a second of CPU.)
  st = output_->Start();
  if (!st.ok()) {
    log_.Error(st.message());
    return 1;
  }
  if (on_ready) on_ready();
  if (!stopped_early) log_.WriteLine({"Ready to profile"});

  auto now = Clock::now();
  auto next_update = now + std::chrono::seconds(options_.update_interval_seconds);
  auto next_native_log = now;
  auto next_round = now + std::chrono::milliseconds(kRoundMs);
  auto next_kernel_stacks_clear = now + kKernelStacksClearInterval;
  const bool timed = options_.duration_seconds > 0;
  auto deadline = now + std::chrono::seconds(options_.duration_seconds);
  int exit_code = 0;
  while (!g_stop_requested) {
    // Poll no later than the round is due: a wake-up (a ring past its
    // watermark) just before it must not put the round off by a whole poll.
    const auto until_round =
        std::chrono::ceil<std::chrono::milliseconds>(next_round - Clock::now()).count();
    int polled = bpf_->Poll(static_cast<int>(std::clamp<int64_t>(until_round, 0, kRoundMs)));
    if (polled < 0 && errno != EINTR) log_.Log(1, "perf buffer poll failed");
    // A sampling round is kRoundMs of sampling, however many wake-ups it took;
    // rounds keep their beat, and one late by more than a round starts anew.
    if (const auto round_now = Clock::now(); round_now >= next_round) {
      next_round += std::chrono::milliseconds(kRoundMs);
      if (next_round <= round_now) next_round = round_now + std::chrono::milliseconds(kRoundMs);
      if (tracker_->rescan_asked()) {  // a process exec'd: look at it again now
        tracker_->clear_rescan_asked();
        Rescan();
      }
      python_->EndRound();
      symbols_->EndRound();  // after the round's events: their ids are marked used
      if (NativeStackTrace::enabled()) {
        NativeStackTrace::cache_eviction();  // exactly once per sampling round
        if (options_.verbosity >= 3 && Clock::now() >= next_native_log) {
          LogNativeRound();  // the counters are cumulative: skipped rounds lose nothing
          next_native_log = Clock::now() + kNativeLogInterval;
        }
      }
    }
    if (Clock::now() >= next_kernel_stacks_clear) {
      StartKernelStackGeneration();
      next_kernel_stacks_clear = Clock::now() + kKernelStacksClearInterval;
    }
    if (g_dump_requested.exchange(false)) {
      DrainEvents();  // every event taken before the signal is in this dump
      st = Dump();
      // One line per failed dump, at any -v; the samples wait for the next one.
      if (!st.ok()) log_.Error("dump failed: " + st.message());
    }
    now = Clock::now();
    if (timed && now >= deadline) break;
    if (now >= next_update) {
      Rescan();
      next_update = now + std::chrono::seconds(options_.update_interval_seconds);
    }
  }
  bpf_->Detach();
  // Sampling is over: what is left (the queued events, for kStopGrace at most,
  // and the last dump) runs at the start-up priority, so that cores busy with
  // the processes PyPerf watched do not hold the final dump past its deadline.
  ScopedPriorityBoost stop_boost(40);
  DrainEvents();  // what was already in the buffers belongs to this run
  st = Dump(/*final_dump=*/true);
  if (!st.ok()) {
    log_.Error("final dump failed: " + st.message());
    exit_code = 1;
  }
  return exit_code;
}

}  // namespace ebpf::pyperf
