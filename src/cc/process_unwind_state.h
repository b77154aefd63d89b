// ProcessUnwindState: what the native unwinder keeps about one process between
// samples: which process it is (its TargetProcess, live or recorded), its
// executable mappings, and libunwind's address space for it (libunwind caches
// register states by ip, which only means something inside one address space),
// plus the bookkeeping that decides when to re-read or drop it.
#pragma once

#include <libunwind.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "file_id.h"
#include "native_module.h"
#include "status.h"
#include "target_process.h"

namespace ebpf {

// One executable mapping of a process.
struct ExecMapping {
  enum Kind : uint8_t { kFile, kVdso, kAnonymous };
  uint64_t start = 0, end = 0, pgoff = 0;
  FileId file;
  uint32_t path = 0;  // index into ProcessUnwindState::paths
  Kind kind = kFile;
};

struct AddrSpaceDeleter {
  void operator()(unw_addr_space* as) const { unw_destroy_addr_space(as); }
};
using AddrSpace = std::unique_ptr<unw_addr_space, AddrSpaceDeleter>;

struct ProcessUnwindState {
  // Reads the process's mappings (the text through *maps_buffer). The address
  // space is the caller's to create.
  static Result<std::unique_ptr<ProcessUnwindState>> Create(std::shared_ptr<TargetProcess> target,
                                                            std::string* maps_buffer);

  // Reads the mappings again.
  Status LoadMappings(std::string* maps_buffer);
  // The executable mapping holding addr, or nullptr.
  const ExecMapping* Find(uint64_t addr);
  const std::string& path(const ExecMapping& m) const { return paths[m.path]; }
  // The module behind a file or vDSO mapping, loaded now: on the file's
  // shared parse (ElfImageCache), or with `from_scratch` on a parse of its own.
  Result<std::unique_ptr<NativeModule>> LoadModule(const ExecMapping& m, bool load_symbols,
                                                   bool from_scratch = false) const;
  // Heap bytes held (mappings, paths, the address space), approximately.
  size_t memory_bytes() const;

  std::shared_ptr<TargetProcess> target;
  std::vector<ExecMapping> maps;   // sorted by start
  std::vector<std::string> paths;  // as the process sees them
  AddrSpace address_space;
  uint64_t process_key = 0;  // NativeSnapshot::process_key when first seen
  uint64_t last_used_round = 0;
  // Re-reads of the mappings this round (bounded: an ip that no mapping
  // explains must not cost a /proc read on every sample).
  uint64_t refresh_round = 0;
  uint32_t refreshes_this_round = 0;
  // libunwind's cached register states predate a refresh: flush before use.
  bool flush_unwind_cache = false;
  // Every module whose unwind table libunwind was given in this address
  // space, with its load bias: a register state libunwind cached may point
  // into its .eh_frame (a CFA expression, as a PLT's) in a later unwind that
  // never looks the module up. One entry per load bias (mapped module);
  // emptied when the address space's cache is flushed (a mappings refresh).
  struct UnwindModule {
    std::shared_ptr<const NativeModule> module;
    uint64_t bias = 0;
  };
  std::vector<UnwindModule> unwind_modules;

 private:
  size_t last_hit_ = 0;  // the mapping Find returned last
};

}  // namespace ebpf
