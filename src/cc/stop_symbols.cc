// StopSymbols: see stop_symbols.h.
#include "stop_symbols.h"

#include "native_frame_name.h"

namespace ebpf {

bool StopSymbols::Contains(std::string_view raw) const {
  if (names_.empty()) return false;
  constexpr std::string_view kCold = ".cold";
  if (raw.size() > kCold.size() && raw.substr(raw.size() - kCold.size()) == kCold)
    raw.remove_suffix(kCold.size());
  if (names_.count(std::string(raw))) return true;
  return raw.size() > 2 && raw[0] == '_' && raw[1] == 'Z' && names_.count(DemangleSymbol(raw));
}

}  // namespace ebpf
