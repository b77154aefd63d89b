// PythonSymbolTable: the user-space owner of the BPF symbol maps (symbols:
// a code object's (file, function, class, first line) -> id, and
// symbol_by_id: id -> the same). It resolves the ids events carry to
// decoded, spelled symbols, caches them, and keeps the maps from filling for
// good: on a host running for months new functions keep coming, and a full
// map would make each of them [Lost Symbol] forever.
//
// Aging. Every id an event names is marked used in the current round. Once
// per round, ids unused for `max_idle_rounds` are retired, and when the maps
// are fuller than the high mark the least recently used ids are retired
// until they are at the low mark. Retiring deletes the id from both maps, so
// the next sample of that code interns it again under a new id.
//
// The marks follow the rate of new symbols. BPF can only intern into room
// left at the last round's end, and a round may come late, so the high mark
// leaves room for two rounds of the most ids a recent round interned (its
// peak, decaying by an eighth a round, rounded up), and the low mark for a
// third one:
//   high = min(high_percent, capacity - 2 * peak)
//   low  = min(low_percent,  high - peak)
// A host whose code is steady has a peak near 0, and the percentages rule.
//
// In flight. An event taken just before its id was retired may still be in
// a perf ring. A retired id's symbol is therefore kept here (still resolving)
// until a full drain of the rings that began at least a round after the
// retirement (AfterFullDrain): by then every event that could name it has
// been read. Ids are never handed out twice while held (the BPF program
// refuses an id that symbol_by_id still holds), so an event never resolves
// to another symbol's name.
//
// Ids that no event ever named (every event lost, or dropped before
// decoding) would hold a slot without being known here: when the maps hold
// more ids than this table knows by an eighth of their capacity, it walks
// symbol_by_id once and retires those.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "PyPerfBpfShared.h"

namespace ebpf::pyperf {

struct PythonSymbol {
  std::string file, function, class_name;  // UTF-8
  int first_line = 0;
  std::string qualified_name;  // "Class.function", or "function"
  // The strings above as interned in a FrameDictionary of that generation
  // (PythonStackDecoder keeps them, so a frame costs no lookup per sample).
  mutable uint64_t dictionary_generation = 0;
  mutable uint32_t name_id = 0, file_id = 0;
};

// The decoded symbol of a raw BPF one.
PythonSymbol DecodePythonSymbol(const pyperf_symbol& raw);

class PythonSymbolTable {
 public:
  // The BPF maps, as the table uses them (PyPerfBpf, or a fake in tests).
  struct Maps {
    // The symbol stored under `id`, if any.
    std::function<std::optional<pyperf_symbol>(int32_t)> lookup;
    // Deletes `id` from both maps; true if it was there.
    std::function<bool(int32_t)> retire;
    // Each CPU's count of symbols it has put into the maps.
    std::function<std::optional<std::vector<uint64_t>>()> interned;
    // Every id in symbol_by_id: a walk of the whole map, so rarely.
    std::function<std::vector<int32_t>()> ids;
  };

  struct Limits {
    uint64_t capacity = 32768;        // entries of each map (--symbols-map-size)
    uint64_t max_idle_rounds = 6000;  // unused this long (10 minutes of rounds): retired
    unsigned high_percent = 90;       // fuller than this: retire the least recently used...
    unsigned low_percent = 75;        // ...down to this
  };

  struct Stats {
    uint64_t in_maps = 0;  // ids in the maps: interned less retired
    uint64_t cached = 0;   // symbols held here, retired ones waiting for a drain included
    uint64_t retired = 0;  // ids retired so far
    uint64_t unknown = 0;  // of those, ids no event had named (found by a walk)
    uint64_t walks = 0;    // walks of symbol_by_id
    uint64_t rounds = 0;
    uint64_t peak_per_round = 0;  // ids interned in a round: the recent peak
  };

  PythonSymbolTable(Maps maps, Limits limits);

  // The symbol of `id` (nullptr if the maps have no such id), marked used.
  const PythonSymbol* Resolve(int32_t id);

  // Once per sampling round: retires idle ids, and the least recently used
  // ones while the maps are too full.
  void EndRound();

  // After a read of every record of every ring that began after this call's
  // predecessor: forgets the ids retired before the round it began in.
  void AfterFullDrain();

  const Stats& stats() const { return stats_; }

 private:
  struct Entry {
    PythonSymbol symbol;
    uint64_t last_used = 0;                 // round
    std::optional<uint64_t> retired_round;  // set once retired: kept for events in flight
  };

  void RefreshFill();
  void CountInMaps();
  void Retire(int32_t id, Entry* entry);
  void RetireUnknownIds();
  void RetireIdle();
  void RetireUnderPressure();

  Maps maps_;
  Limits limits_;
  Stats stats_;
  uint64_t round_ = 1;
  std::unordered_map<int32_t, Entry> entries_;
  uint64_t live_known_ = 0;  // entries not retired
  uint64_t interned_ = 0;    // sum of the per-CPU counts
  uint64_t interned_at_round_end_ = 0;
  std::deque<std::pair<uint64_t, int32_t>> retired_;  // (round, id), oldest first
  uint64_t next_idle_scan_ = 0;
};

}  // namespace ebpf::pyperf
