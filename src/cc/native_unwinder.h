// NativeUnwinder: turns one sample's native snapshot (user registers plus a
// copy of the user stack taken by BPF) into named native frames, leaf first.
//
// Unwinding uses libunwind's remote API with our own accessors
// (unwind_accessors.h): the stack copy, then the mapped files' images, then the
// process's memory with process_vm_readv; never ptrace. What is read of a
// process goes through one interface (target_process.h) with two
// implementations: the live process, and a recording replayed after it is
// gone. Each process gets its own unw_addr_space_t (process_unwind_state.h).
//
// There is one unwind loop with two strategies: through the caches (steady
// state), or every frame resolved from scratch (set_cache_enabled(false)).
//
// With the caches on, a sample is first walked without libunwind at all
// (cached_rule_walk.h): each name cache entry also holds the frame's unwind
// rule at that address, read once from the file's .eh_frame by our own reader
// (eh_frame_reader.h), so a cached frame costs a mapping lookup, a hash
// lookup and a read or two of the stack copy. Any frame not cached yet, or
// whose rule is not one of the simple shapes (CFA on RSP or RBP, return
// address and RBP saved at CFA+n), or a read outside the stack copy, sends
// the whole sample to libunwind, which fills the cache. Both give the same
// frames; stats() counts which way each unwind went.
//
// Names never lie: a symbol is printed only for an address inside it, else
// `module+0xADDR` with ADDR in the ELF file's own terms (see
// native_frame_name.h). Names are cached by (file identity, offset), shared by
// all processes (proc_name_cache.h). Unwinding stops after the first frame
// whose symbol is in the caller's stop set, or that holds the snapshot's
// stop_frame_anchor (that frame is included; or, with walk_past_stop_symbols,
// stop-set frames are marked and the walk goes on), after
// max_depth frames, at the outermost frame, or (stack_copy_only) where a step
// needs stack memory the snapshot's copy does not hold.
//
// Failures never throw: they add a marker frame whose name says what failed,
// such as `unw_init_remote (<reason>)` or `no registers`, and set the result's
// error flag (counted in stats). The caller spells it as a marker.
//
// Per-process state (mappings, address space) is keyed by pid and dropped when
// the process dies, its pid is reused (start time changes) or it execs (its
// memory layout fingerprint changes): checked by cache_eviction() once per
// round and when a leaf ip falls outside the known mappings (at most a few
// /proc re-reads per process per round). An exec noticed neither way within
// the round it happens in could be unwound with the old mappings; a caller
// that knows better (exec/exit events -> ForgetProcess, or
// NativeSnapshot::process_key from BPF) makes this exact.
// Each known process holds a libunwind address space (~26 KiB, mostly
// libunwind's register-state cache).
//
// Not thread-safe; meant for the single sampling loop. In steady state an
// Unwind allocates nothing if the caller passes the same output vector again.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bounded_lru_cache.h"
#include "file_id.h"
#include "native_module_cache.h"
#include "native_unwind_types.h"
#include "status.h"

namespace ebpf {

struct NativeUnwinderOptions {
  // Symbols (raw or demangled) after which unwinding stops, e.g.
  // {"_PyEval_EvalFrameDefault", "PyEval_EvalFrameEx"}.
  std::vector<std::string> stop_symbols;
  size_t max_depth = 128;
  // Stop-set frames are marked (NativeFrame::stop_symbol), not the end.
  bool walk_past_stop_symbols = false;
  // The stack is read only from the snapshot's copy, never live: a step
  // beyond it ends the unwind (NativeUnwindResult::copy_ended). (A module's
  // writable data, read for an FDE's personality pointer, is still read
  // from the process.)
  bool stack_copy_only = false;
  bool cache_enabled = true;
  // `sym (/full/path)` and `/full/path+0xaddr` instead of `sym` and
  // `basename+0xaddr`.
  bool insert_dso_name = false;
  CacheLimits name_cache_limits;
  CacheLimits module_cache_limits = DefaultModuleCacheLimits();
  // Processes not unwound for this many rounds are forgotten.
  uint64_t process_max_age_rounds = 600;
};

struct NativeUnwinderStats {
  CacheStats names;                // (file, offset) -> name
  CacheStats modules;              // file -> symbols, unwind table, image
  size_t module_mapped_bytes = 0;  // file images mapped by cached modules
  size_t processes = 0;            // per-process states held
  size_t process_bytes = 0;        // their mappings + libunwind address spaces (approximate)
  uint64_t processes_dropped = 0;  // exited, reused, exec'd or forgotten
  uint64_t maps_reads = 0;         // /proc/PID/maps parses
  uint64_t unwinds = 0;
  // Unwinds done from the name cache's rules alone, without libunwind; and
  // those that started so but had to be redone with libunwind.
  uint64_t fast_unwinds = 0;
  uint64_t fast_unwinds_abandoned = 0;
  uint64_t frames = 0;
  uint64_t errors = 0;  // unwinds that ended with a marker frame
  uint64_t rounds = 0;  // cache_eviction calls
  // Reads libunwind needed beyond the stack copy and the file images
  // (process_vm_readv for a live process).
  uint64_t remote_reads = 0;
};

class NativeUnwinder {
 public:
  explicit NativeUnwinder(NativeUnwinderOptions options = NativeUnwinderOptions());
  ~NativeUnwinder();
  NativeUnwinder(const NativeUnwinder&) = delete;
  NativeUnwinder& operator=(const NativeUnwinder&) = delete;

  // Unwinds one snapshot into *out_leaf_first (replaced; its strings are
  // reused). Never throws; failures show as marker frames and result.error.
  NativeUnwindResult Unwind(const NativeSnapshot& snapshot,
                            std::vector<NativeFrame>* out_leaf_first);

  // Run exactly once per sampling round: ages and bounds the caches, and
  // drops the state of processes that exited, were replaced or exec'd.
  void cache_eviction();

  NativeUnwinderStats stats() const;

  // With caching off every frame is resolved from scratch, as PyPerf used to:
  // a new address space per sample, /proc/PID/maps read again, the ELF file
  // opened and parsed again in find_proc_info and in unw_get_proc_name.
  // Frames are the same either way; only the cost differs.
  void set_cache_enabled(bool enabled);
  bool cache_enabled() const;

  // The path (as a process maps it) and build-id (lowercase hex, "" if none)
  // of a file a NativeFrame named, while its module is cached; false if not.
  bool DescribeFile(const FileId& file, std::string* path, std::string* build_id) const;

  // Drops what is known about a pid (call on exit/exec events).
  void ForgetProcess(pid_t pid);

  // Replays a recorded process instead of a live one (benchmarks, fixtures):
  // `maps_text` is its /proc/PID/maps, and mapped files are read under
  // `root_dir` (the recorded copies; "" = the host's files). Memory outside
  // the stack copy and the files is unavailable. Replaces any state for pid.
  Status AddRecordedProcess(pid_t pid, std::string maps_text, std::string root_dir);

  void set_name_cache_limits(const CacheLimits& limits);
  void set_module_cache_limits(const CacheLimits& limits);
  const NativeUnwinderOptions& options() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ebpf
