// ProcNameCache: (device, inode, offset in the file) -> the printed frame name
// (symbol or `module+0xaddr`), i.e. the result of what used to be a
// unw_get_proc_name call for every frame of every sample, and the frame's
// unwind rule at that address (frame_rule.h), so that a stack seen before is
// unwound from this cache alone (cached_rule_walk.h).
//
// Keyed by the mapped FILE, never by pid, so ten processes running the same
// libpython share entries and a reused pid or an exec can never pick up another
// process's names. Bounded by entries, bytes and age (bounded_lru_cache.h);
// lookups allocate nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "bounded_lru_cache.h"
#include "file_id.h"
#include "frame_rule.h"

namespace ebpf {

struct NameKey {
  FileId file;
  uint64_t offset = 0;  // offset in the file of the address being named
  bool operator==(const NameKey& o) const { return file == o.file && offset == o.offset; }
};

struct NameKeyHash {
  size_t operator()(const NameKey& k) const {
    return MixHash((k.file.dev * 0x9e3779b97f4a7c15ULL ^ k.file.ino) * 31 + k.offset);
  }
};

// What a frame is printed as, and how to unwind it, for one (file, offset).
struct CachedName {
  std::string text;         // "sym", "sym (/path)", "module+0xaddr", ...
  uint64_t elf_vaddr = 0;   // the address in the ELF file's own terms (0 if unknown)
  bool symbolized = false;  // text names a symbol containing the address
  bool is_stop = false;     // the symbol is in the unwinder's stop set
  // How to step to the caller from this address (simple == false: only
  // libunwind can).
  FrameRule rule = FrameRule();
};

struct CachedNameBytes {
  size_t operator()(const CachedName& name) const { return name.text.capacity(); }
};

class ProcNameCache : public BoundedLruCache<NameKey, CachedName, NameKeyHash, CachedNameBytes> {
 public:
  using BoundedLruCache::BoundedLruCache;
  // Drops every name of one file (the file behind a device+inode changed).
  size_t EraseFile(const FileId& file) {
    return EraseIf([&](const NameKey& k, const CachedName&) { return k.file == file; });
  }
};

}  // namespace ebpf
