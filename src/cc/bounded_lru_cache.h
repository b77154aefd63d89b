// BoundedLruCache: an LRU map with an entry bound and a byte bound, enforced on
// every insert, and an age bound: EndRound() (run by the owner exactly once per
// sampling round) evicts entries that were not used for max_age_rounds rounds.
// Lookups allocate nothing; only inserts do. Not thread-safe: one sampling loop
// uses it. The symbol caches (proc_name_cache.h, native_module_cache.h) are
// built on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <unordered_map>
#include <utility>

namespace ebpf {

struct CacheLimits {
  size_t max_entries = 65536;
  size_t max_bytes = size_t{16} << 20;  // 16 MiB
  uint64_t max_age_rounds = 600;        // rounds without a use before eviction
};

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

// An LRU map holding entry, byte and age bounds. An entry's bytes are what
// `PayloadBytes()(value)` says its value holds on the heap plus an estimate of
// the bookkeeping.
template <typename Key, typename Value, typename Hash, typename PayloadBytes>
class BoundedLruCache {
 public:
  explicit BoundedLruCache(const CacheLimits& limits = CacheLimits()) : limits_(limits) {}

  // Returns the value and marks it used this round; counts a hit or a miss.
  const Value* Lookup(const Key& key) {
    auto it = index_.find(key);
    if (it == index_.end()) {
      ++stats_.misses;
      return nullptr;
    }
    ++stats_.hits;
    Touch(it->second);
    return &it->second->value;
  }
  // Like Lookup, but a miss is not counted: for a fast path that leaves its
  // misses to a slower one, which looks them up (and counts them) again.
  const Value* Probe(const Key& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    ++stats_.hits;
    Touch(it->second);
    return &it->second->value;
  }
  // Takes back `n` hits of Probe whose lookups are about to be repeated.
  void UncountHits(uint64_t n) { stats_.hits -= n; }
  // Like Lookup, without counting or touching.
  const Value* Peek(const Key& key) const {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &it->second->value;
  }

  // Inserts (or replaces) and then evicts least recently used entries until
  // both bounds hold again. The new entry itself is kept even if it alone
  // exceeds the byte bound, so the caller can always use what it inserted;
  // the pointer is valid until the next Insert, EndRound or Erase.
  const Value* Insert(const Key& key, Value value) {
    Erase(key);
    size_t bytes = PayloadBytes()(value) + kOverheadBytes;
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

}  // namespace ebpf
