// Printing native frames; see native_frame_name.h.
#include "native_frame_name.h"

#include <cxxabi.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "native_module.h"
#include "utf8.h"

namespace ebpf {

std::string DemangleSymbol(std::string_view name) {
  if (name.size() < 2 || name[0] != '_' || name[1] != 'Z') return std::string(name);
  std::string mangled(name);
  int status = 0;
  // __cxa_demangle returns malloc'ed memory.
  std::unique_ptr<char, decltype(&free)> demangled(
      abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status), &free);
  if (status != 0 || !demangled) return mangled;
  return std::string(demangled.get());
}

namespace {

// Paths come from proc_maps without the kernel's " (deleted)": a deleted
// file's frames are named after the file.
std::string_view Basename(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

bool FormatNativeFrameName(const NativeModule* module, std::string_view module_path, uint64_t vaddr,
                           bool insert_dso_name, std::string* out) {
  out->clear();
  if (module) {
    if (const NativeModuleSymbol* sym = module->FindSymbol(vaddr)) {
      *out = DemangleSymbol(module->SymbolName(*sym));
      if (insert_dso_name) {
        out->append(" (");
        out->append(module_path);
        out->push_back(')');
      }
      // Symbol tables and paths are bytes: what is printed is UTF-8.
      SanitizeUtf8InPlace(out);
      return true;
    }
  }
  out->append(insert_dso_name ? module_path : Basename(module_path));
  char hex[24];
  snprintf(hex, sizeof(hex), "+0x%" PRIx64, vaddr);
  out->append(hex);
  SanitizeUtf8InPlace(out);
  return false;
}

void FormatUnreadableModuleFrameName(std::string_view module_path, bool insert_dso_name,
                                     std::string* out) {
  out->assign("[unknown] (");
  out->append(insert_dso_name ? module_path : Basename(module_path));
  out->push_back(')');
  SanitizeUtf8InPlace(out);
}

}  // namespace ebpf
