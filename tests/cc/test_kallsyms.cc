// Tests for kernel symbolization: the real /proc/kallsyms (root sees real
// addresses) and fake kallsyms files.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "kallsyms.h"
#include "support/test_support.h"

namespace ebpf {
namespace {

using pyperf_test::ReadFile;
using pyperf_test::TempDir;

std::string WriteFile(const TempDir& dir, const std::string& name, const std::string& text) {
  std::string path = dir.File(name);
  FILE* f = fopen(path.c_str(), "w");
  EXPECT_NE(f, nullptr);
  fputs(text.c_str(), f);
  fclose(f);
  return path;
}

struct Line {
  uint64_t addr;
  char type;
  std::string name;
};

std::vector<Line> ParseKallsyms(const std::string& text) {
  std::vector<Line> out;
  std::istringstream in(text);
  std::string addr, type, name;
  std::string rest;
  while (in >> addr >> type >> name) {
    std::getline(in, rest);  // optional "[module]"
    out.push_back({std::stoull(addr, nullptr, 16), type[0], name});
  }
  return out;
}

TEST(KernelSymbols, ResolvesARealSymbolToItsOwnName) {
  auto table = KernelSymbols::Load();
  if (!table.ok()) PYPERF_SKIP_OR_FAIL("cannot use /proc/kallsyms: " + table.error());
  ASSERT_GT(table->size(), 1000u);

  // A global text symbol that shares its address with no other symbol and is
  // at least 2 bytes long (the next symbol starts later).
  auto lines = ParseKallsyms(ReadFile("/proc/kallsyms"));
  std::map<uint64_t, int> names_at;
  for (const auto& l : lines) names_at[l.addr]++;
  const Line* chosen = nullptr;
  for (const auto& l : lines) {
    if (l.type != 'T' || names_at[l.addr] != 1) continue;
    auto next = names_at.upper_bound(l.addr);
    if (next != names_at.end() && next->first > l.addr + 1) {
      chosen = &l;
      if (l.name == "schedule" || l.name == "vfs_read") break;  // prefer a famous one
    }
  }
  ASSERT_NE(chosen, nullptr);
  EXPECT_EQ(table->Lookup(chosen->addr), chosen->name);
  EXPECT_EQ(table->Lookup(chosen->addr + 1), chosen->name);
}

TEST(KernelSymbols, AddressBelowEverySymbolIsNotFound) {
  auto table = KernelSymbols::Load();
  if (!table.ok()) PYPERF_SKIP_OR_FAIL("cannot use /proc/kallsyms: " + table.error());
  EXPECT_EQ(table->Lookup(0), std::nullopt);
  EXPECT_EQ(table->Lookup(0x1000), std::nullopt);
}

TEST(KernelSymbols, FakeFileWithUnsortedLines) {
  TempDir dir;
  std::string path = WriteFile(dir, "kallsyms",
                               "ffffffff81000300 T third\n"
                               "ffffffff81000100 t first\n"
                               "0000000000000000 A fixed_percpu_data\n"
                               "ffffffff81000200 W second\n"
                               "ffffffff81000250 D some_data\n"
                               "ffffffffc0001000 t mod_func\t[some_module]\n"
                               "not a line\n"
                               "ffffffff81000180 w weak_one\n");
  auto table = KernelSymbols::Load(path);
  ASSERT_TRUE(table.ok()) << table.error();
  EXPECT_EQ(table->size(), 5u);  // the A and D symbols are not text
  EXPECT_EQ(table->Lookup(0xffffffff810000ff), std::nullopt);
  EXPECT_EQ(table->Lookup(0xffffffff81000100), "first");
  EXPECT_EQ(table->Lookup(0xffffffff8100017f), "first");
  EXPECT_EQ(table->Lookup(0xffffffff81000180), "weak_one");
  EXPECT_EQ(table->Lookup(0xffffffff81000200), "second");
  // Data symbols do not end a text symbol: "second" runs up to "third".
  EXPECT_EQ(table->Lookup(0xffffffff81000260), "second");
  EXPECT_EQ(table->Lookup(0xffffffff81000300), "third");
  // Module symbols keep their name without the module.
  EXPECT_EQ(table->Lookup(0xffffffffc0001010), "mod_func");
  // The last symbol has no known end.
  EXPECT_EQ(table->Lookup(~0ull), "mod_func");
}

TEST(KernelSymbols, AliasesResolveToOneNameWhateverTheOrder) {
  TempDir dir;
  std::string a = WriteFile(dir, "a",
                            "ffffffff81000000 T _text\n"
                            "ffffffff81000000 t local_alias\n"
                            "ffffffff81000000 T startup_64\n"
                            "ffffffff81000100 T __x64_sys_read\n"
                            "ffffffff81000100 T ksys_read\n");
  std::string b = WriteFile(dir, "b",
                            "ffffffff81000100 T ksys_read\n"
                            "ffffffff81000000 T startup_64\n"
                            "ffffffff81000100 T __x64_sys_read\n"
                            "ffffffff81000000 t local_alias\n"
                            "ffffffff81000000 T _text\n");
  for (const auto& path : {a, b}) {
    auto table = KernelSymbols::Load(path);
    ASSERT_TRUE(table.ok()) << table.error();
    EXPECT_EQ(table->size(), 2u);
    // A global name without leading underscores is preferred.
    EXPECT_EQ(table->Lookup(0xffffffff81000010), "startup_64");
    EXPECT_EQ(table->Lookup(0xffffffff81000100), "ksys_read");
  }
}

TEST(KernelSymbols, HiddenAddressesAreAnError) {
  TempDir dir;
  std::string path = WriteFile(dir, "kallsyms",
                               "0000000000000000 T _text\n"
                               "0000000000000000 T schedule\n");
  auto table = KernelSymbols::Load(path);
  ASSERT_FALSE(table.ok());
  EXPECT_NE(table.error().find("kptr_restrict"), std::string::npos) << table.error();
}

TEST(KernelSymbols, MissingFileIsAnError) {
  auto table = KernelSymbols::Load("/nonexistent/kallsyms");
  ASSERT_FALSE(table.ok());
  EXPECT_NE(table.error().find("/nonexistent/kallsyms"), std::string::npos) << table.error();
}

TEST(KernelSymbols, EmptyTableMissesEverything) {
  KernelSymbols table;
  EXPECT_TRUE(table.empty());
  EXPECT_EQ(table.Lookup(0xffffffff81000000), std::nullopt);
}

}  // namespace
}  // namespace ebpf
