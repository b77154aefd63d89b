// NativeModuleCache: (device, inode) -> the loaded NativeModule (symbol table,
// unwind-table location, file image), shared by every process that maps the
// file, i.e. what libunwind's _UPT helpers would otherwise reopen and reparse
// again and again. Bounded like every cache here (bounded_lru_cache.h). A
// module is built on the file's one parse (ElfImageCache, keyed by identity
// and stamp), which Python detection shares.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "bounded_lru_cache.h"
#include "file_id.h"
#include "native_module.h"

namespace ebpf {

// Defaults for the module cache: fewer, much larger entries (a libpython
// symbol table is about 1 MiB). The file images themselves are mapped from the
// page cache and not counted here.
inline CacheLimits DefaultModuleCacheLimits() {
  CacheLimits limits;
  limits.max_entries = 1024;
  limits.max_bytes = size_t{256} << 20;
  return limits;
}

// A module, or why it could not be loaded (so a missing file is not retried
// for every frame; it ages out like any entry).
struct CachedModule {
  std::shared_ptr<const NativeModule> module;  // null when loading failed
  std::string error;
  std::string path;  // as the first process seen mapping it named it
};

struct CachedModuleBytes {
  size_t operator()(const CachedModule& entry) const {
    return entry.error.capacity() + entry.path.capacity() +
           (entry.module ? entry.module->memory_bytes() : 0);
  }
};

class NativeModuleCache
    : public BoundedLruCache<FileId, CachedModule, FileIdHash, CachedModuleBytes> {
 public:
  explicit NativeModuleCache(const CacheLimits& limits = DefaultModuleCacheLimits())
      : BoundedLruCache(limits) {}
  // Bytes of file images the cached modules keep mapped (page cache).
  size_t mapped_bytes() const {
    size_t total = 0;
    ForEach([&](const FileId&, const CachedModule& m) {
      if (m.module) total += m.module->mapped_bytes();
    });
    return total;
  }
};

}  // namespace ebpf
