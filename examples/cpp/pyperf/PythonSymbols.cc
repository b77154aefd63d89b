// PythonSymbolTable: resolving and aging the BPF symbol maps' ids (see
// PythonSymbols.h).
#include "PythonSymbols.h"

#include <algorithm>
#include <utility>

#include "PythonText.h"

namespace ebpf::pyperf {

PythonSymbol DecodePythonSymbol(const pyperf_symbol& raw) {
  PythonSymbol s;
  // The class name is a NUL-terminated copy: its last byte is the terminator.
  s.file = DecodePythonText(raw.file, sizeof(raw.file), raw.file_text);
  s.function = DecodePythonText(raw.function, sizeof(raw.function), raw.function_text);
  s.class_name = DecodePythonText(raw.class_name, sizeof(raw.class_name) - 1, raw.class_text);
  s.first_line = raw.first_line;
  s.qualified_name = s.class_name.empty() ? s.function : s.class_name + "." + s.function;
  return s;
}

PythonSymbolTable::PythonSymbolTable(Maps maps, Limits limits)
    : maps_(std::move(maps)), limits_(limits) {
  next_idle_scan_ = round_ + std::max<uint64_t>(1, limits_.max_idle_rounds / 10);
}

const PythonSymbol* PythonSymbolTable::Resolve(int32_t id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) {
    // BPF stores a symbol under its id before it sends an event naming it.
    auto raw = maps_.lookup(id);
    if (!raw) return nullptr;
    it = entries_.emplace(id, Entry{DecodePythonSymbol(*raw), round_, std::nullopt}).first;
    ++live_known_;
  }
  // A retired id named by an event in flight resolves, and stays retired.
  if (!it->second.retired_round) it->second.last_used = round_;
  return &it->second.symbol;
}

void PythonSymbolTable::RefreshFill() {
  auto counts = maps_.interned();
  if (!counts) return;
  interned_ = 0;
  for (uint64_t n : *counts) interned_ += n;
  const uint64_t this_round =
      interned_ > interned_at_round_end_ ? interned_ - interned_at_round_end_ : 0;
  interned_at_round_end_ = interned_;
  stats_.peak_per_round =
      std::max(this_round, stats_.peak_per_round - (stats_.peak_per_round + 7) / 8);
  CountInMaps();
}

void PythonSymbolTable::CountInMaps() {
  stats_.in_maps = interned_ > stats_.retired ? interned_ - stats_.retired : 0;
}

void PythonSymbolTable::Retire(int32_t id, Entry* entry) {
  if (maps_.retire(id)) ++stats_.retired;
  entry->retired_round = round_;
  retired_.emplace_back(round_, id);
  --live_known_;
}

void PythonSymbolTable::RetireUnknownIds() {
  ++stats_.walks;
  for (int32_t id : maps_.ids()) {
    if (entries_.count(id)) continue;
    // Never named by an event this table read; one may still be in flight,
    // so its symbol is kept like any retired one's.
    auto raw = maps_.lookup(id);
    if (!raw) continue;
    auto& entry =
        entries_.emplace(id, Entry{DecodePythonSymbol(*raw), 0, std::nullopt}).first->second;
    ++live_known_;
    Retire(id, &entry);
    ++stats_.unknown;
  }
}

void PythonSymbolTable::RetireIdle() {
  for (auto& [id, entry] : entries_)
    if (!entry.retired_round && entry.last_used + limits_.max_idle_rounds <= round_)
      Retire(id, &entry);
}

void PythonSymbolTable::RetireUnderPressure() {
  const uint64_t cap = limits_.capacity, peak = stats_.peak_per_round;
  const uint64_t high =
      std::min(cap * limits_.high_percent / 100, cap > 2 * peak ? cap - 2 * peak : 0);
  const uint64_t low = std::min(cap * limits_.low_percent / 100, high > peak ? high - peak : 0);
  if (stats_.in_maps <= high) return;
  std::vector<std::pair<uint64_t, int32_t>> by_use;  // (last used, id)
  by_use.reserve(live_known_);
  for (const auto& [id, entry] : entries_)
    if (!entry.retired_round) by_use.emplace_back(entry.last_used, id);
  const size_t excess = static_cast<size_t>(stats_.in_maps - low);
  const size_t n = std::min(excess, by_use.size());
  std::nth_element(by_use.begin(), by_use.begin() + static_cast<std::ptrdiff_t>(n), by_use.end());
  for (size_t i = 0; i < n; ++i) Retire(by_use[i].second, &entries_.at(by_use[i].second));
  CountInMaps();
}

void PythonSymbolTable::EndRound() {
  RefreshFill();
  // Ids in the maps that no event named: a walk finds them.
  if (stats_.in_maps > live_known_ + limits_.capacity / 8) RetireUnknownIds();
  if (round_ >= next_idle_scan_) {
    RetireIdle();
    next_idle_scan_ = round_ + std::max<uint64_t>(1, limits_.max_idle_rounds / 10);
  }
  CountInMaps();
  RetireUnderPressure();
  stats_.cached = entries_.size();
  stats_.rounds = round_;
  ++round_;
}

void PythonSymbolTable::AfterFullDrain() {
  // Retired in a round that ended before the previous one: at least a round
  // before this drain began, so every event naming it has now been read.
  while (!retired_.empty() && retired_.front().first + 1 < round_) {
    entries_.erase(retired_.front().second);
    retired_.pop_front();
  }
  stats_.cached = entries_.size();
}

}  // namespace ebpf::pyperf
