// ElfImageCache: parsed ELF images (the file mapped, libelf's handle over it,
// the header and the PT_LOAD segments) keyed by the file's identity and stamp
// (device, inode, size, mtime), so that a file is parsed once however many
// readers want it: Python detection (ElfFile) and native symbolization
// (NativeModule) share libpython's parse, and a file rewritten since (another
// size or mtime) is parsed anew, never answered from the old image.
//
// One cache serves the whole process (Shared()). It is bounded like every
// cache here (bounded_lru_cache.h): by entries, by approximate heap bytes, and
// by age, EndRound() being run once per sampling round (by
// NativeUnwinder::cache_eviction). An image handed out lives as long as its
// holders, whatever the cache evicts. Thread-safe: a lock around each lookup
// and insert (parsing runs outside it); files are looked up per load, not per
// sample.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "bounded_lru_cache.h"
#include "elf_image.h"
#include "mapped_file.h"
#include "status.h"

namespace ebpf {

// Few entries, each the libelf bookkeeping of one file (about 10 KiB) plus its
// mapping (page cache, not counted): enough to carry a file from Python
// detection to its first native use, and the files a round loads.
inline CacheLimits DefaultElfImageCacheLimits() {
  CacheLimits limits;
  limits.max_entries = 64;
  limits.max_bytes = size_t{4} << 20;
  limits.max_age_rounds = 600;
  return limits;
}

struct ElfImageCacheStats {
  CacheStats cache;     // lookups by file stamp
  uint64_t parses = 0;  // files mapped and parsed (each miss that parsed)
};

class ElfImageCache {
 public:
  explicit ElfImageCache(const CacheLimits& limits = DefaultElfImageCacheLimits());
  ElfImageCache(const ElfImageCache&) = delete;
  ElfImageCache& operator=(const ElfImageCache&) = delete;

  // The process-wide cache that Python detection and native symbolization share.
  static ElfImageCache& Shared();

  // The image of `file` (opened by OpenRegularFile or OpenProcessMappedFile):
  // the cached one for its stamp, or parsed now. Errors (not ELF, empty,
  // unmappable) name the path and are not cached.
  Result<std::shared_ptr<const ElfImage>> Get(const OpenedFile& file);
  // Opens `path` and returns its image (see Get).
  Result<std::shared_ptr<const ElfImage>> GetPath(const std::string& path);

  // Run once per sampling round: evicts images unused for max_age_rounds.
  void EndRound();
  void set_limits(const CacheLimits& limits);
  ElfImageCacheStats stats() const;

 private:
  struct ImageBytes {
    size_t operator()(const std::shared_ptr<const ElfImage>& image) const;
  };
  using Cache =
      BoundedLruCache<FileStamp, std::shared_ptr<const ElfImage>, FileStampHash, ImageBytes>;

  mutable std::mutex mu_;
  Cache images_;
  uint64_t parses_ = 0;
};

}  // namespace ebpf
