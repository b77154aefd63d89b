// ElfFile: read-only access to one ELF file by path, on its mapped ElfImage
// (shared through ElfImageCache: a file is parsed once for every reader). It
// answers the questions a profiler asks of a mapped binary: symbols by name,
// the ELF type and PT_LOAD segments (to work out a mapping's load bias),
// initialised bytes at a virtual address, the GNU build-id, and strings in the
// read-only data (for embedded version strings).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "elf_image.h"
#include "status.h"

namespace ebpf {

struct ElfSymbol {
  uint64_t value = 0;  // st_value: a link-time virtual address for data and code
  uint64_t size = 0;
  uint8_t type = 0;      // STT_OBJECT, STT_FUNC, ...
  uint8_t binding = 0;   // STB_GLOBAL, STB_LOCAL, STB_WEAK, ...
  bool dynamic = false;  // found in .dynsym (else .symtab)
};

// A NUL-terminated string found in read-only data, and where it lives.
struct ElfString {
  std::string_view text;  // valid while the ElfFile lives
  uint64_t vaddr = 0;
};

class ElfFile {
 public:
  // Opens `path` (any path, e.g. /proc/PID/root/... or /proc/PID/map_files/...),
  // its image from the shared ElfImageCache. Errors name the path and say
  // whether it is missing, unreadable or not ELF.
  static Result<ElfFile> Open(const std::string& path);
  // Reads `image` (the file opened through `path`, as errors name it).
  ElfFile(std::string path, std::shared_ptr<const ElfImage> image);

  const std::string& path() const { return path_; }
  const ElfImage& image() const { return *image_; }

  // e_type: ET_EXEC (fixed addresses), ET_DYN (shared object or PIE), ...
  uint16_t type() const { return image_->type(); }
  bool is_64bit() const { return image_->is_64bit(); }
  bool is_little_endian() const { return image_->is_little_endian(); }
  const std::vector<ElfLoadSegment>& load_segments() const { return image_->load_segments(); }
  bool has_symtab() const { return has_symtab_; }

  // A defined symbol named `name`: .dynsym first, then .symtab (where static
  // symbols live; absent once the file is stripped). nullopt if neither has it.
  std::optional<ElfSymbol> FindSymbol(std::string_view name) const;
  // Several names in one pass over each table; result[i] answers names[i].
  std::vector<std::optional<ElfSymbol>> FindSymbols(
      const std::vector<std::string_view>& names) const;

  // The bias to add to this file's virtual addresses for a process that maps
  // file offset `mapping_offset` at `mapping_start` (runtime address = bias +
  // st_value); nullopt if that offset starts no PT_LOAD segment's page. 0 for
  // an ET_EXEC mapped where it was linked.
  std::optional<uint64_t> LoadBias(uint64_t mapping_start, uint64_t mapping_offset) const {
    return ComputeLoadBias(image_->load_segments(), mapping_start, mapping_offset);
  }

  // Copies `size` bytes at link-time address `vaddr` as the file initialises
  // them (bytes past p_filesz in a PT_LOAD, i.e. .bss, read as zero). Error if
  // the range is not inside one PT_LOAD segment.
  Status ReadAtVirtualAddress(uint64_t vaddr, void* out, size_t size) const;

  // The GNU build-id as lower-case hex, or nullopt if the file has none.
  std::optional<std::string> BuildId() const;

  // Calls `visit` with each NUL-terminated string in the allocated read-only
  // data (non-writable, non-executable PROGBITS sections such as .rodata; the
  // read-only PT_LOAD segments if the file has no section headers). Each
  // string is visited whole; a linker may have merged a shorter string into
  // the tail of a longer one, so callers looking for a short string should
  // look at suffixes too. `visit` returns false to stop.
  void ForEachReadOnlyString(const std::function<bool(const ElfString&)>& visit) const;
  // All strings for which `pred` holds.
  std::vector<ElfString> FindReadOnlyStrings(
      const std::function<bool(std::string_view)>& pred) const;

 private:
  std::string path_;
  std::shared_ptr<const ElfImage> image_;
  bool has_symtab_ = false;
};

}  // namespace ebpf
