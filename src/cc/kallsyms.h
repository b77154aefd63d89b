// kallsyms: kernel symbolization from /proc/kallsyms. The table is loaded once
// (text symbols only: types t, T, w, W), sorted by address, and looked up by
// binary search. An address belongs to the nearest symbol at or below it: a
// symbol ends where the next one starts, and the last one has no end.
//
// /proc/kallsyms shows real addresses only to root (or with
// kernel.kptr_restrict=0 and CAP_SYSLOG); otherwise every address is 0 and
// Load fails with a message saying so.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "status.h"

namespace ebpf {

class KernelSymbols {
 public:
  // An empty table: every lookup misses.
  KernelSymbols() = default;

  // Reads a file in kallsyms format ("<hex address> <type> <name>[\t[module]]").
  static Result<KernelSymbols> Load(const std::string& path = "/proc/kallsyms");
  // Parses kallsyms text; `source` names it in error messages.
  static Result<KernelSymbols> Parse(std::string_view text,
                                     const std::string& source = "kallsyms text");

  // The symbol containing `addr`, or nullopt below the first symbol. The view
  // stays valid as long as this table; the lookup allocates nothing.
  std::optional<std::string_view> Lookup(uint64_t addr) const;

  size_t size() const { return addrs_.size(); }
  bool empty() const { return addrs_.empty(); }

 private:
  std::vector<uint64_t> addrs_;         // sorted, unique
  std::vector<uint32_t> name_offsets_;  // name i is names_[off[i], off[i+1])
  std::string names_;
};

}  // namespace ebpf
