// PythonSymbolTable (examples/cpp/pyperf/PythonSymbols.h) over a fake of the
// two BPF symbol maps that behaves as the program does: interning a key gives
// a new id, retiring deletes both entries. Checked: an id resolves to its own
// symbol; idle ids are retired after their age; a full map is brought back
// to its low mark, least recently used first; the marks leave two rounds of
// room at a fast rate of new symbols; a retired id still resolves
// until a full drain a round later, then not; ids no event named are found
// by a walk and retired. And a decoded symbol's qualified name.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "PythonSymbols.h"

namespace pyperf_test {
namespace {

using ebpf::pyperf::DecodePythonSymbol;
using ebpf::pyperf::PythonSymbol;
using ebpf::pyperf::PythonSymbolTable;

// The BPF maps as the program keeps them: key (a function name here) <-> id.
struct FakeMaps {
  std::map<std::string, int32_t> by_key;
  std::map<int32_t, std::string> by_id;
  int32_t next_id = 100;
  uint64_t interned = 0;
  int lookups = 0, walks = 0;

  int32_t Intern(const std::string& function) {
    auto it = by_key.find(function);
    if (it != by_key.end()) return it->second;
    const int32_t id = next_id++;
    by_key[function] = id;
    by_id[id] = function;
    ++interned;
    return id;
  }

  PythonSymbolTable::Maps Maps() {
    PythonSymbolTable::Maps m;
    m.lookup = [this](int32_t id) -> std::optional<pyperf_symbol> {
      ++lookups;
      auto it = by_id.find(id);
      if (it == by_id.end()) return std::nullopt;
      pyperf_symbol s{};
      std::memcpy(s.function, it->second.data(), it->second.size());
      s.function_text.size = static_cast<uint32_t>(it->second.size());
      s.function_text.encoding = PYPERF_TEXT_LATIN1;
      std::memcpy(s.file, "app.py", 6);
      s.file_text.size = 6;
      s.file_text.encoding = PYPERF_TEXT_LATIN1;
      s.first_line = 1;
      return s;
    };
    m.retire = [this](int32_t id) {
      auto it = by_id.find(id);
      if (it == by_id.end()) return false;
      by_key.erase(it->second);
      by_id.erase(it);
      return true;
    };
    m.interned = [this] {  // two CPUs
      return std::optional<std::vector<uint64_t>>({interned / 2, interned - interned / 2});
    };
    m.ids = [this] {
      ++walks;
      std::vector<int32_t> ids;
      for (const auto& [id, name] : by_id) ids.push_back(id);
      return ids;
    };
    return m;
  }
};

PythonSymbolTable::Limits SmallLimits() {
  PythonSymbolTable::Limits l;
  l.capacity = 100;
  l.max_idle_rounds = 50;
  l.high_percent = 90;
  l.low_percent = 75;
  return l;
}

std::string FunctionOf(const PythonSymbol* s) { return s ? s->function : "<none>"; }

TEST(PythonSymbolTable, AnIdResolvesToItsOwnSymbolOnceLookedUp) {
  FakeMaps maps;
  PythonSymbolTable table(maps.Maps(), SmallLimits());
  const int32_t a = maps.Intern("alpha"), b = maps.Intern("beta");
  EXPECT_EQ(FunctionOf(table.Resolve(a)), "alpha");
  EXPECT_EQ(FunctionOf(table.Resolve(b)), "beta");
  EXPECT_EQ(FunctionOf(table.Resolve(a)), "alpha");
  EXPECT_EQ(maps.lookups, 2) << "a resolved id is cached";
  EXPECT_EQ(table.Resolve(12345), nullptr);
  const PythonSymbol* alpha = table.Resolve(a);
  EXPECT_EQ(alpha->qualified_name, "alpha");
  EXPECT_EQ(alpha->file, "app.py");
  EXPECT_EQ(alpha->first_line, 1);
}

// A method's qualified name is "Class.function", as StackSpeller spells it
// after the module; a plain function's is the function alone.
TEST(DecodePythonSymbol, QualifiedNameJoinsClassAndFunction) {
  pyperf_symbol raw{};
  auto set = [](char* field, pyperf_text* text, const std::string& value) {
    std::memcpy(field, value.data(), value.size());
    text->size = static_cast<uint32_t>(value.size());
    text->encoding = PYPERF_TEXT_LATIN1;
  };
  set(raw.file, &raw.file_text, "/srv/app.py");
  set(raw.function, &raw.function_text, "handle");
  set(raw.class_name, &raw.class_text, "RequestHandler");
  raw.first_line = 14;
  PythonSymbol method = DecodePythonSymbol(raw);
  EXPECT_EQ(method.qualified_name, "RequestHandler.handle");
  EXPECT_EQ(method.function, "handle");
  EXPECT_EQ(method.class_name, "RequestHandler");
  EXPECT_EQ(method.file, "/srv/app.py");
  EXPECT_EQ(method.first_line, 14);

  raw.class_name[0] = '\0';
  raw.class_text.size = 0;
  EXPECT_EQ(DecodePythonSymbol(raw).qualified_name, "handle");
}

TEST(PythonSymbolTable, IdleIdsAreRetiredAfterTheirAgeAndUsedOnesStay) {
  FakeMaps maps;
  PythonSymbolTable table(maps.Maps(), SmallLimits());
  const int32_t used = maps.Intern("used"), idle = maps.Intern("idle");
  table.Resolve(used);
  table.Resolve(idle);
  for (int round = 0; round < 60; ++round) {
    table.Resolve(used);
    table.EndRound();
  }
  EXPECT_EQ(maps.by_id.count(idle), 0u) << "unused for more than 50 rounds";
  EXPECT_EQ(maps.by_key.count("idle"), 0u);
  EXPECT_EQ(maps.by_id.count(used), 1u);
  EXPECT_EQ(table.stats().retired, 1u);
  EXPECT_EQ(table.stats().in_maps, 1u);
  // The next sample of "idle" interns it under a new id, which resolves.
  const int32_t again = maps.Intern("idle");
  EXPECT_NE(again, idle);
  EXPECT_EQ(FunctionOf(table.Resolve(again)), "idle");
}

TEST(PythonSymbolTable, AFullMapGoesBackToItsLowMarkLeastRecentlyUsedFirst) {
  FakeMaps maps;
  auto limits = SmallLimits();
  limits.max_idle_rounds = 1000;  // pressure alone
  PythonSymbolTable table(maps.Maps(), limits);
  std::vector<int32_t> ids;
  // Five new symbols a round, each used when interned; f0..f4 (the first
  // round's) are used again every round. At five a round the percentages are
  // the marks (100 - 2 * 5 is 90, and 90 - 5 is above 75). After 18 rounds the maps hold 90 (not
  // above the high mark); the 19th brings 95, and the 20 least recently used, f5..f24 (rounds 2 to
  // 5), are retired.
  for (int round = 1; round <= 19; ++round) {
    for (int i = 0; i < 5; ++i) {
      ids.push_back(maps.Intern("f" + std::to_string(ids.size())));
      table.Resolve(ids.back());
    }
    for (size_t hot = 0; hot < 5; ++hot) table.Resolve(ids[hot]);
    table.EndRound();
    EXPECT_EQ(table.stats().peak_per_round, 5u) << "round " << round;
    if (round == 18) {
      EXPECT_EQ(maps.by_id.size(), 90u) << "at the high mark, not above";
    }
  }
  EXPECT_EQ(maps.by_id.size(), 75u);
  EXPECT_EQ(table.stats().in_maps, 75u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(maps.by_id.count(ids[i]), 1u) << "f" << i;
  for (int i = 5; i < 25; ++i) EXPECT_EQ(maps.by_id.count(ids[i]), 0u) << "f" << i;
  for (int i = 25; i < 95; ++i) EXPECT_EQ(maps.by_id.count(ids[i]), 1u) << "f" << i;
}

// New symbols at a high rate: the marks leave room for two rounds of the peak
// (BPF finds a map full, and a frame is [Lost Symbol], only once the room
// left at a round's end is used up), and go back to the percentages once the
// rate falls.
TEST(PythonSymbolTable, AFastRateOfNewSymbolsKeepsTwoRoundsOfRoom) {
  FakeMaps maps;
  auto limits = SmallLimits();
  limits.max_idle_rounds = 1000;
  PythonSymbolTable table(maps.Maps(), limits);
  int made = 0;
  auto round_of = [&](int n) {
    for (int i = 0; i < n; ++i) table.Resolve(maps.Intern("f" + std::to_string(made++)));
    table.EndRound();
  };
  // 20 a round: high 100 - 40 = 60, low 60 - 20 = 40. Rounds 1..3 bring 60;
  // the fourth 80, retired down to 40, the 40 least recent (rounds 1 and 2).
  for (int round = 1; round <= 12; ++round) {
    round_of(20);
    EXPECT_EQ(table.stats().peak_per_round, 20u);
    EXPECT_LE(maps.by_id.size() + 2 * 20, limits.capacity) << "round " << round;
    if (round == 3) {
      EXPECT_EQ(maps.by_id.size(), 60u);
    }
    if (round == 4) {
      EXPECT_EQ(maps.by_id.size(), 40u);
      EXPECT_EQ(maps.by_key.count("f0") + maps.by_key.count("f39"), 0u) << "rounds 1 and 2 retired";
      EXPECT_EQ(maps.by_key.count("f40"), 1u) << "round 3's symbols stay";
    }
  }
  // A late round that brings twice the peak still fits in the room left.
  for (int i = 0; i < 40; ++i) table.Resolve(maps.Intern("f" + std::to_string(made++)));
  EXPECT_LE(maps.by_id.size(), limits.capacity);
  table.EndRound();
  EXPECT_EQ(table.stats().peak_per_round, 40u);
  // The rate falls to nothing: the peak decays to 0, and a slow fill to 90
  // retires nothing.
  for (int round = 0; round < 40; ++round) round_of(0);
  EXPECT_EQ(table.stats().peak_per_round, 0u);
  const uint64_t retired = table.stats().retired;
  while (maps.by_id.size() < 90) round_of(1);
  EXPECT_EQ(maps.by_id.size(), 90u);
  EXPECT_EQ(table.stats().retired, retired) << "the percentages are the marks again";
}

TEST(PythonSymbolTable, ARetiredIdResolvesUntilAFullDrainARoundLater) {
  FakeMaps maps;
  auto limits = SmallLimits();
  limits.max_idle_rounds = 10;
  PythonSymbolTable table(maps.Maps(), limits);
  const int32_t old = maps.Intern("old");
  table.Resolve(old);
  int rounds = 0;
  while (maps.by_id.count(old) && rounds < 100) {
    table.EndRound();
    ++rounds;
  }
  ASSERT_EQ(maps.by_id.count(old), 0u) << "never retired";
  // An event taken before the retirement, read now: still its own name,
  // though the maps no longer hold it; a drain at once does not forget it.
  EXPECT_EQ(FunctionOf(table.Resolve(old)), "old");
  table.AfterFullDrain();
  EXPECT_EQ(FunctionOf(table.Resolve(old)), "old");
  // The round after the retirement ends (a round, 100 ms, later): a drain
  // that begins now reads every event that could name it.
  table.EndRound();
  table.AfterFullDrain();
  EXPECT_EQ(table.Resolve(old), nullptr) << "a round and a full drain later, forgotten";
  EXPECT_EQ(table.stats().cached, 0u);
}

TEST(PythonSymbolTable, IdsNoEventNamedAreFoundByAWalkAndRetired) {
  FakeMaps maps;
  PythonSymbolTable table(maps.Maps(), SmallLimits());
  const int32_t seen = maps.Intern("seen");
  table.Resolve(seen);
  for (int i = 0; i < 10; ++i) maps.Intern("unseen" + std::to_string(i));
  table.EndRound();
  EXPECT_EQ(maps.walks, 0) << "10 unknown ids are within an eighth of 100";
  for (int i = 10; i < 20; ++i) maps.Intern("unseen" + std::to_string(i));
  table.EndRound();
  EXPECT_EQ(maps.walks, 1);
  EXPECT_EQ(maps.by_id.size(), 1u);
  EXPECT_EQ(maps.by_id.count(seen), 1u);
  EXPECT_EQ(table.stats().unknown, 20u);
  EXPECT_EQ(table.stats().in_maps, 1u);
}

}  // namespace
}  // namespace pyperf_test
