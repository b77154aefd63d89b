// ElfImage: the bytes of one ELF file, mapped read-only (or an image already in
// memory), with the libelf handle over them and the facts every reader of a
// binary needs: the ELF header, the PT_LOAD segments, bytes at a virtual
// address, sections by type or name, and the GNU build-id. ElfFile (symbols by
// name, read-only strings: what PyPerf asks of a Python binary) and
// NativeModule (function symbols and the unwind table: what native unwinding
// asks of every mapped file) are both built on it, and share one parse of
// each file through ElfImageCache (elf_image_cache.h).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mapped_file.h"
#include "status.h"

// libelf's handles; <libelf.h> stays out of this header.
struct Elf;
struct Elf_Scn;

namespace ebpf {

struct ElfLoadSegment {
  uint64_t vaddr = 0;
  uint64_t offset = 0;  // in the file
  uint64_t filesz = 0;  // as the program header says (the image may be shorter)
  uint64_t memsz = 0;
  uint64_t align = 0;
  uint32_t flags = 0;  // PF_R | PF_W | PF_X
};

// The load bias of a mapping that maps file offset `mapping_offset` at
// `mapping_start`, given the file's PT_LOAD segments: nullopt if that offset
// starts no segment's page. A free function so callers that cached the
// segments need not keep the file open.
std::optional<uint64_t> ComputeLoadBias(const std::vector<ElfLoadSegment>& segments,
                                        uint64_t mapping_start, uint64_t mapping_offset);

class ElfImage {
 public:
  // Maps the open regular file `fd` (the mapping stays after fd is closed; it
  // shares the page cache with every process that maps the file). To parse a
  // file once for every reader, see ElfImageCache.
  static Result<ElfImage> MapFd(int fd);
  // An image already in memory that outlives this object (the vDSO, a
  // decompressed .gnu_debugdata).
  static Result<ElfImage> FromMemory(const uint8_t* data, size_t size);

  ElfImage(ElfImage&& other) noexcept;
  ElfImage& operator=(ElfImage&& other) noexcept;
  ElfImage(const ElfImage&) = delete;
  ElfImage& operator=(const ElfImage&) = delete;
  ~ElfImage();

  // The whole image, and [offset, offset+size) of it clipped to the image.
  std::string_view bytes() const;
  std::string_view Range(uint64_t offset, uint64_t size) const;
  // Bytes the image maps from a file (0 for an image in memory).
  size_t mapped_bytes() const { return mapping_ ? size_ : 0; }
  // The file it was mapped from, as fstat saw it then (zero for an image in memory).
  const FileStamp& file() const { return file_; }

  // e_type: ET_EXEC (fixed addresses), ET_DYN (shared object or PIE), ...
  uint16_t type() const { return type_; }
  bool is_64bit() const { return is_64bit_; }
  bool is_little_endian() const { return little_endian_; }

  // PT_LOAD segments in address order.
  const std::vector<ElfLoadSegment>& load_segments() const { return load_segments_; }
  // The segment containing `vaddr` in memory (nullptr if none).
  const ElfLoadSegment* SegmentForVaddr(uint64_t vaddr) const;
  // File offset -> ELF virtual address, through the PT_LOAD segment holding it.
  std::optional<uint64_t> FileOffsetToVaddr(uint64_t offset) const;
  // The image's bytes for [vaddr, vaddr+len) when that range lies in the
  // file-backed part of one PT_LOAD segment (and, unless `allow_writable`, a
  // segment that is not writable, whose memory therefore equals the file).
  const uint8_t* BytesAtVaddr(uint64_t vaddr, size_t len, bool allow_writable) const;
  // p_vaddr of the first program header of type `p_type` (e.g. PT_GNU_EH_FRAME).
  std::optional<uint64_t> ProgramHeaderVaddr(uint32_t p_type) const;

  // The libelf handle, for readers that walk symbol tables and sections.
  Elf* elf() const { return elf_.get(); }
  // The same bytes (the mapping is shared), header and segments without
  // libelf's bookkeeping (a few hundred bytes a section), for a holder that is
  // done with sections, symbol tables and notes: its elf() is null and its
  // section lookups find nothing.
  ElfImage WithoutLibelf() const;
  bool has_sections() const;
  Elf_Scn* FindSection(uint32_t sh_type) const;
  Elf_Scn* FindSection(std::string_view name) const;
  // A section's bytes in the image (empty for SHT_NOBITS or a bad header).
  std::string_view SectionBytes(Elf_Scn* section) const;

  // The GNU build-id as lower-case hex, "" if the file has none: from the
  // note sections, or the PT_NOTE segments when sections are gone.
  std::string BuildId() const;

 private:
  struct ElfDeleter {
    void operator()(Elf* elf) const;
  };
  ElfImage() = default;
  Status Load();

  // Declared before elf_: libelf's handle over the bytes goes first.
  std::shared_ptr<const uint8_t> mapping_;  // munmaps; null for an image in memory
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  FileStamp file_;
  std::unique_ptr<Elf, ElfDeleter> elf_;
  uint16_t type_ = 0;
  bool is_64bit_ = true;
  bool little_endian_ = true;
  std::vector<ElfLoadSegment> load_segments_;
};

}  // namespace ebpf
