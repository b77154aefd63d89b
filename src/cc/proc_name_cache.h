// ProcNameCache: the caches that make native symbolization cheap in steady
// state, shared by every process PyPerf samples.
//
// Both are keyed by the mapped FILE, never by pid, so ten processes running the
// same libpython share entries and a reused pid or an exec can never pick up
// another process's names:
//  - ProcNameCache: (device, inode, offset in the file) -> the printed frame
//    name (symbol or `module+0xaddr`), i.e. the result of what used to be a
//    unw_get_proc_name call for every frame of every sample.
//  - NativeModuleCache: (device, inode) -> the loaded NativeModule (symbol
//    table, unwind-table location, file image), i.e. what libunwind's _UPT
//    helpers would otherwise reopen and reparse again and again.
//
// Both are LRU caches with an entry bound and a byte bound, enforced on every
// insert, and an age bound: EndRound() (run by the caller exactly once per
// sampling round, through NativeUnwinder::cache_eviction) evicts entries that
// were not used for max_age_rounds rounds. Lookups allocate nothing; only
// inserts do. Not thread-safe: one sampling loop uses them.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>

#include "elf_symbolizer.h"

namespace pyperf {

struct CacheLimits {
  size_t max_entries = 65536;
  size_t max_bytes = size_t{16} << 20;  // 16 MiB
  uint64_t max_age_rounds = 600;        // rounds without a use before eviction
};

// Defaults for the module cache: fewer, much larger entries (a libpython
// symbol table is about 1 MiB). The file images themselves are mapped from the
// page cache and not counted here.
inline CacheLimits DefaultModuleCacheLimits() {
  CacheLimits limits;
  limits.max_entries = 1024;
  limits.max_bytes = size_t{256} << 20;
  return limits;
}

struct CacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t evictions = 0;  // by age and by bounds
  size_t entries = 0;
  size_t bytes = 0;  // approximate heap bytes, bookkeeping included
  double hit_rate() const {
    uint64_t total = hits + misses;
    return total ? static_cast<double>(hits) / static_cast<double>(total) : 0.0;
  }
};

// A mapped file's identity: device and inode as /proc/PID/maps shows them.
// The vDSO, which has no inode, uses kVdsoFileId.
struct FileId {
  uint64_t dev = 0;
  uint64_t ino = 0;
  bool operator==(const FileId& o) const { return dev == o.dev && ino == o.ino; }
  bool operator!=(const FileId& o) const { return !(*this == o); }
};
inline constexpr FileId kVdsoFileId{0, 1};

struct NameKey {
  FileId file;
  uint64_t offset = 0;  // offset in the file of the address being named
  bool operator==(const NameKey& o) const { return file == o.file && offset == o.offset; }
};

inline uint64_t MixHash(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}
struct FileIdHash {
  size_t operator()(const FileId& f) const {
    return MixHash(f.dev * 0x9e3779b97f4a7c15ULL ^ f.ino);
  }
};
struct NameKeyHash {
  size_t operator()(const NameKey& k) const {
    return MixHash((k.file.dev * 0x9e3779b97f4a7c15ULL ^ k.file.ino) * 31 + k.offset);
  }
};

// An LRU map holding entry, byte and age bounds. Bytes are what the caller
// says an entry costs plus an estimate of the bookkeeping.
template <typename Key, typename Value, typename Hash>
class BoundedLruCache {
 public:
  explicit BoundedLruCache(const CacheLimits& limits = CacheLimits()) : limits_(limits) {}

  // Returns the value and marks it used this round; counts a hit or a miss.
  Value* Lookup(const Key& key) {
    auto it = index_.find(key);
    if (it == index_.end()) {
      ++stats_.misses;
      return nullptr;
    }
    ++stats_.hits;
    Touch(it->second);
    return &it->second->value;
  }
  // Like Lookup, without counting or touching.
  Value* Peek(const Key& key) {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &it->second->value;
  }

  // Inserts (or replaces) and then evicts least recently used entries until
  // both bounds hold again. The new entry itself is kept even if it alone
  // exceeds the byte bound, so the caller can always use what it inserted;
  // the pointer is valid until the next Insert, EndRound or Erase.
  Value* Insert(const Key& key, Value value, size_t payload_bytes) {
    Erase(key);
    size_t bytes = payload_bytes + kOverheadBytes;
    lru_.push_front(Node{key, std::move(value), bytes, round_});
    index_.emplace(key, lru_.begin());
    stats_.bytes += bytes;
    while (lru_.size() > 1 &&
           (lru_.size() > limits_.max_entries || stats_.bytes > limits_.max_bytes)) {
      EvictBack();
    }
    return &lru_.front().value;
  }

  // Advances the round and evicts entries unused for max_age_rounds rounds.
  void EndRound() {
    ++round_;
    while (!lru_.empty() && lru_.back().last_round + limits_.max_age_rounds <= round_) {
      EvictBack();
    }
  }

  bool Erase(const Key& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return false;
    stats_.bytes -= it->second->bytes;
    lru_.erase(it->second);
    index_.erase(it);
    return true;
  }

  // Erases every entry for which pred(key, value) holds; returns how many.
  template <typename Pred>
  size_t EraseIf(Pred pred) {
    size_t n = 0;
    for (auto it = lru_.begin(); it != lru_.end();) {
      if (pred(it->key, it->value)) {
        stats_.bytes -= it->bytes;
        index_.erase(it->key);
        it = lru_.erase(it);
        ++n;
      } else {
        ++it;
      }
    }
    return n;
  }

  void Clear() {
    lru_.clear();
    index_.clear();
    stats_.bytes = 0;
  }

  void set_limits(const CacheLimits& limits) {
    limits_ = limits;
    while (!lru_.empty() &&
           (lru_.size() > limits_.max_entries || stats_.bytes > limits_.max_bytes)) {
      EvictBack();
    }
  }
  const CacheLimits& limits() const { return limits_; }
  template <typename Fn>
  void ForEach(Fn fn) const {
    for (const Node& n : lru_) fn(n.key, n.value);
  }
  uint64_t round() const { return round_; }
  size_t size() const { return lru_.size(); }

  CacheStats stats() const {
    CacheStats s = stats_;
    s.entries = lru_.size();
    return s;
  }

 private:
  struct Node {
    Key key;
    Value value;
    size_t bytes;
    uint64_t last_round;
  };
  using List = std::list<Node>;
  // List node + hash node + bucket, roughly.
  static constexpr size_t kOverheadBytes =
      sizeof(Node) + 2 * sizeof(void*) + sizeof(Key) + sizeof(void*) * 3;

  void Touch(typename List::iterator it) {
    it->last_round = round_;
    if (it != lru_.begin()) lru_.splice(lru_.begin(), lru_, it);  // no allocation
  }
  void EvictBack() {
    Node& node = lru_.back();
    stats_.bytes -= node.bytes;
    index_.erase(node.key);
    lru_.pop_back();
    ++stats_.evictions;
  }

  CacheLimits limits_;
  List lru_;
  std::unordered_map<Key, typename List::iterator, Hash> index_;
  CacheStats stats_;
  uint64_t round_ = 0;
};

// What a frame is printed as, for one (file, offset).
struct CachedName {
  std::string text;         // "sym", "sym (/path)", "module+0xaddr", ...
  uint64_t elf_vaddr = 0;   // the address in the ELF file's own terms (0 if unknown)
  bool symbolized = false;  // text names a symbol containing the address
  bool is_stop = false;     // the symbol is in the unwinder's stop set
};

class ProcNameCache {
 public:
  explicit ProcNameCache(const CacheLimits& limits = CacheLimits()) : cache_(limits) {}
  const CachedName* Lookup(const NameKey& key) { return cache_.Lookup(key); }
  const CachedName* Insert(const NameKey& key, CachedName name) {
    size_t bytes = name.text.capacity();
    return cache_.Insert(key, std::move(name), bytes);
  }
  // Drops every name of one file (the file behind a device+inode changed).
  size_t EraseFile(const FileId& file) {
    return cache_.EraseIf([&](const NameKey& k, const CachedName&) { return k.file == file; });
  }
  void EndRound() { cache_.EndRound(); }
  void Clear() { cache_.Clear(); }
  void set_limits(const CacheLimits& limits) { cache_.set_limits(limits); }
  const CacheLimits& limits() const { return cache_.limits(); }
  CacheStats stats() const { return cache_.stats(); }

 private:
  BoundedLruCache<NameKey, CachedName, NameKeyHash> cache_;
};

// A module, or why it could not be loaded (so a missing file is not retried
// for every frame; it ages out like any entry).
struct CachedModule {
  std::shared_ptr<const NativeModule> module;  // null when loading failed
  std::string error;
};

class NativeModuleCache {
 public:
  explicit NativeModuleCache(const CacheLimits& limits = DefaultModuleCacheLimits())
      : cache_(limits) {}
  const CachedModule* Lookup(const FileId& file) { return cache_.Lookup(file); }
  const CachedModule* Peek(const FileId& file) { return cache_.Peek(file); }
  const CachedModule* Insert(const FileId& file, CachedModule entry) {
    size_t bytes = entry.error.capacity() + (entry.module ? entry.module->memory_bytes() : 0);
    return cache_.Insert(file, std::move(entry), bytes);
  }
  bool Erase(const FileId& file) { return cache_.Erase(file); }
  // Bytes of file images the cached modules keep mapped (page cache).
  size_t mapped_bytes() const {
    size_t total = 0;
    cache_.ForEach([&](const FileId&, const CachedModule& m) {
      if (m.module) total += m.module->mapped_bytes();
    });
    return total;
  }
  void EndRound() { cache_.EndRound(); }
  void Clear() { cache_.Clear(); }
  void set_limits(const CacheLimits& limits) { cache_.set_limits(limits); }
  const CacheLimits& limits() const { return cache_.limits(); }
  CacheStats stats() const { return cache_.stats(); }

 private:
  BoundedLruCache<FileId, CachedModule, FileIdHash> cache_;
};

}  // namespace pyperf
