// NativeModule: everything PyPerf needs to know about one mapped ELF file
// (a "native module") to unwind through it and to name its code addresses.
//
// A NativeModule is loaded once per file and then shared by every process that
// maps that file (see native_module_cache.h). On the file's ElfImage (parsed
// once per file for every reader, elf_image_cache.h) it holds:
//  - the PT_LOAD segments, to turn a file offset into the address the ELF file
//    itself uses (what `addr2line -e FILE` takes: the load bias removed);
//  - where the .eh_frame_hdr binary-search table is, so libunwind can be handed
//    a ready unwind table instead of opening the file again for each frame;
//  - a read-only view of the file image, so libunwind's many small reads of
//    .eh_frame_hdr/.eh_frame are served from memory rather than the target;
//  - the function symbols with their sizes, from the best sources a distro
//    offers, merged best first: .symtab; a separate debug file found through
//    the build-id or .gnu_debuglink (looked up under the process's root, so a
//    container's /usr/lib/debug is used); .gnu_debugdata (the xz-compressed
//    "MiniDebugInfo" symtab, decompressed with liblzma when it is present);
//    .dynsym.
// A name is only given for an address inside a symbol (start <= a < start+size);
// anything else is printed as `module+0xADDR` (native_frame_name.h), which
// never lies and can be symbolized offline.
//
// Why not libbcc's bcc_elf_foreach_sym: Debian's libbcc 0.26 is built without
// liblzma (no .gnu_debugdata), looks debug files up only on the host's
// /usr/lib/debug (not the container's), and would reopen the file a second time
// for what we read here anyway (segments, build-id, .eh_frame_hdr). The merge
// and size rules are the same as libbcc's.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "elf_image.h"
#include "status.h"

namespace ebpf {

// Where a symbol came from, best first.
enum class SymbolSource : uint8_t {
  kSymtab = 0,     // the file's own .symtab
  kDebugFile = 1,  // .symtab of a separate debug file (build-id / debuglink)
  kDebugData = 2,  // .symtab inside .gnu_debugdata (MiniDebugInfo)
  kDynsym = 3,     // exported symbols only
};

struct NativeModuleSymbol {
  uint64_t start = 0;  // ELF virtual address
  uint64_t size = 0;   // > 0: symbols without a size are never used for names
  uint32_t name = 0;   // offset into the module's name blob
  SymbolSource source = SymbolSource::kDynsym;
  uint8_t binding = 0;  // STB_* (for choosing among aliases)
};

// The .eh_frame_hdr search table in ELF virtual addresses; `usable` only when
// it is the sorted (datarel|sdata4) table libunwind's remote lookup expects.
struct UnwindTableLocation {
  bool usable = false;
  uint64_t eh_frame_hdr_vaddr = 0;
  uint64_t table_vaddr = 0;
  uint64_t fde_count = 0;
};

struct NativeModuleLoadOptions {
  // Prefix under which the process's files are reached, e.g. "/proc/PID/root"
  // (containers) or a recorded snapshot's root; "" means the host's "/".
  std::string root;
  // The file's path as the process sees it (from /proc/PID/maps). Used to find
  // a .gnu_debuglink file next to it; may be empty.
  std::string path_in_root;
  bool load_symbols = true;
  // Also look on the host's /usr/lib/debug when root is not the host's
  // (a debug file found by build-id is correct wherever it lives).
  bool search_host_debug_dirs = true;
};

class NativeModule {
 public:
  NativeModule(const NativeModule&) = delete;
  NativeModule& operator=(const NativeModule&) = delete;

  // Loads from a parsed image (from ElfImageCache: the file's one parse,
  // shared with Python detection). The module keeps the image's mapping (page
  // cache shared with the target, so it costs little memory) but not its
  // libelf bookkeeping. Anything but a 64-bit ELF file with PT_LOAD segments
  // is refused.
  static Result<std::unique_ptr<NativeModule>> Load(const ElfImage& image,
                                                    const NativeModuleLoadOptions& options);
  // Opens `path` and loads it, its image from the shared ElfImageCache.
  static Result<std::unique_ptr<NativeModule>> LoadFromPath(const std::string& path,
                                                            const NativeModuleLoadOptions& options);
  // Loads from an image already in memory that outlives the module (the vDSO).
  static Result<std::unique_ptr<NativeModule>> LoadFromMemory(
      const uint8_t* image, size_t size, const NativeModuleLoadOptions& options);

  // The mapped file: segments, file offsets to ELF addresses, bytes at an
  // address (see elf_image.h).
  const ElfImage& image() const { return image_; }
  std::optional<uint64_t> FileOffsetToVaddr(uint64_t offset) const {
    return image_.FileOffsetToVaddr(offset);
  }

  // The symbol whose [start, start+size) contains vaddr, or nullptr. When
  // several do (aliases, nested symbols) the one starting last wins, and among
  // equal starts the best source, then global over weak over local.
  const NativeModuleSymbol* FindSymbol(uint64_t vaddr) const;
  std::string_view SymbolName(const NativeModuleSymbol& symbol) const;
  const std::vector<NativeModuleSymbol>& symbols() const { return symbols_; }

  const UnwindTableLocation& unwind_table() const { return unwind_table_; }
  const std::string& build_id() const { return build_id_; }      // lowercase hex
  const std::string& debug_file() const { return debug_file_; }  // "" if none
  // The best symbol source found (kDynsym when only exported symbols exist).
  SymbolSource best_source() const { return best_source_; }
  // Identity of the file at load time, to notice a file replaced under the
  // same device+inode (inode reuse after an upgrade). Zero for in-memory images.
  uint64_t file_size() const { return image_.file().size; }
  int64_t file_mtime_ns() const { return image_.file().mtime_ns; }
  // Approximate heap bytes (symbols + names + tables); the file mapping is
  // page cache and is reported separately.
  size_t memory_bytes() const;
  size_t mapped_bytes() const { return image_.mapped_bytes(); }

 private:
  explicit NativeModule(ElfImage image) : image_(std::move(image)) {}
  friend class NativeModuleLoader;

  ElfImage image_;
  UnwindTableLocation unwind_table_;
  std::string build_id_;
  std::string debug_file_;
  SymbolSource best_source_ = SymbolSource::kDynsym;
  std::vector<NativeModuleSymbol> symbols_;  // sorted by start
  std::vector<uint64_t> max_end_;            // max(start+size) over symbols_[0..i]
  std::string names_;                        // NUL-separated symbol names
};

}  // namespace ebpf
