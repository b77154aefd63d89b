// kallsyms: see kallsyms.h.
#include "kallsyms.h"

#include <algorithm>
#include <charconv>

#include "read_file.h"

namespace ebpf {
namespace {

struct Candidate {
  uint64_t addr;
  int rank;        // preference among aliases at one address; lower wins
  uint32_t order;  // position in the file, the last tie-breaker
  std::string_view name;
};

// Several names often share an address (aliases such as _text/_stext). Prefer
// a global symbol, then a local, then a weak one, and among those the name
// with fewer leading underscores (the public spelling); then file order. This
// makes the choice deterministic whatever order the lines come in.
int Rank(char type, std::string_view name) {
  int kind = type == 'T' ? 0 : type == 't' ? 1 : type == 'W' ? 2 : 3;
  int underscores = static_cast<int>(std::min<size_t>(name.find_first_not_of('_'), 15));
  return kind * 16 + underscores;
}

bool IsText(char type) { return type == 't' || type == 'T' || type == 'w' || type == 'W'; }

// Parses one line; false if it is not a well-formed text symbol.
bool ParseLine(std::string_view line, uint64_t* addr, char* type, std::string_view* name) {
  auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), *addr, 16);
  if (ec != std::errc()) return false;
  line.remove_prefix(static_cast<size_t>(end - line.data()));
  // " T name" (a module symbol continues with "\t[module]").
  if (line.size() < 4 || line[0] != ' ' || line[2] != ' ') return false;
  *type = line[1];
  if (!IsText(*type)) return false;
  line.remove_prefix(3);
  *name = line.substr(0, line.find_first_of(" \t\r"));
  return !name->empty();
}

}  // namespace

Result<KernelSymbols> KernelSymbols::Load(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  return Parse(*text, path);
}

Result<KernelSymbols> KernelSymbols::Parse(std::string_view text, const std::string& source) {
  std::vector<Candidate> candidates;
  uint32_t order = 0;
  bool any_nonzero = false;
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    Candidate c{};
    char type = 0;
    if (!ParseLine(line, &c.addr, &type, &c.name)) continue;
    c.rank = Rank(type, c.name);
    c.order = order++;
    any_nonzero |= c.addr != 0;
    candidates.push_back(c);
  }
  if (candidates.empty()) return Status::Error("no kernel text symbols in " + source);
  if (!any_nonzero) {
    return Status::Error("every address in " + source +
                         " is 0: the kernel hides them (kernel.kptr_restrict); run as root "
                         "to symbolize kernel frames");
  }

  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    if (a.addr != b.addr) return a.addr < b.addr;
    if (a.rank != b.rank) return a.rank < b.rank;
    return a.order < b.order;
  });

  KernelSymbols table;
  size_t name_bytes = 0;
  for (const auto& c : candidates) name_bytes += c.name.size();
  table.names_.reserve(name_bytes);
  table.addrs_.reserve(candidates.size());
  table.name_offsets_.reserve(candidates.size() + 1);
  for (const auto& c : candidates) {
    if (!table.addrs_.empty() && table.addrs_.back() == c.addr) continue;  // an alias
    table.addrs_.push_back(c.addr);
    table.name_offsets_.push_back(static_cast<uint32_t>(table.names_.size()));
    table.names_.append(c.name);
  }
  table.name_offsets_.push_back(static_cast<uint32_t>(table.names_.size()));
  table.names_.shrink_to_fit();
  return table;
}

std::optional<std::string_view> KernelSymbols::Lookup(uint64_t addr) const {
  auto it = std::upper_bound(addrs_.begin(), addrs_.end(), addr);
  if (it == addrs_.begin()) return std::nullopt;
  size_t i = static_cast<size_t>(it - addrs_.begin()) - 1;
  return std::string_view(names_).substr(name_offsets_[i], name_offsets_[i + 1] - name_offsets_[i]);
}

}  // namespace ebpf
