// How a native frame is printed: the demangled symbol when the address lies
// inside one, else `module+0xADDR` with ADDR in the ELF file's own terms (what
// `addr2line -e FILE` takes), so a name never lies and can be symbolized
// offline. Names are strict UTF-8 (utf8.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ebpf {

class NativeModule;

// "_ZN3foo3barEv" -> "foo::bar()"; anything not mangled is returned as is.
std::string DemangleSymbol(std::string_view name);

// The frame name printed for an address: the (demangled) symbol if the address
// is inside one, else `<basename of module_path>+0x<vaddr>`. `module_path` is
// the mapped path as MemoryMapping::path holds it (without " (deleted)"). With
// insert_dso_name the module's full path is used: `sym (/full/path)` and
// `/full/path+0x<vaddr>`. `vaddr` is the ELF virtual address (load bias
// removed). The name is strict UTF-8 (utf8.h): symbol and path bytes that are
// not become U+FFFD. Returns whether a symbol was found.
bool FormatNativeFrameName(const NativeModule* module, std::string_view module_path, uint64_t vaddr,
                           bool insert_dso_name, std::string* out);
// Same, for a module that could not be read: `[unknown] (basename)`.
void FormatUnreadableModuleFrameName(std::string_view module_path, bool insert_dso_name,
                                     std::string* out);

}  // namespace ebpf
