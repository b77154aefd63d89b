// StopSymbols: the symbols NativeUnwinder stops at (or marks, walking past
// them): a set of names, matched as a frame's symbol is spelled in the ELF
// file, demangled for C++, and with GCC's ".cold" suffix (the unlikely blocks
// of a function, moved away but run in the same call) taken off.
#pragma once

#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace ebpf {

class StopSymbols {
 public:
  explicit StopSymbols(const std::vector<std::string>& names)
      : names_(names.begin(), names.end()) {}
  // Whether the symbol `raw`, as the ELF file spells it, is one of them.
  bool Contains(std::string_view raw) const;

 private:
  std::unordered_set<std::string> names_;
};

}  // namespace ebpf
