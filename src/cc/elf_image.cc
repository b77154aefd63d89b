// ElfImage over libelf; see elf_image.h.
#include "elf_image.h"

#include <elf.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace ebpf {
namespace {

// libelf refuses to work until the version handshake has been made once.
bool InitLibelf() {
  static const bool ok = elf_version(EV_CURRENT) != EV_NONE;
  return ok;
}

std::string LibelfError() {
  const char* msg = elf_errmsg(-1);
  return msg ? msg : "unknown libelf error";
}

uint64_t PageSize() {
  static const uint64_t size = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

// The GNU build-id among the ELF notes in `notes`, as lower-case hex ("" if none).
std::string BuildIdFromNotes(std::string_view notes) {
  static const char kHex[] = "0123456789abcdef";
  const auto* data = reinterpret_cast<const uint8_t*>(notes.data());
  const size_t size = notes.size();
  auto align4 = [](size_t v) { return (v + 3) & ~size_t{3}; };
  size_t pos = 0;
  while (pos + 12 <= size) {
    uint32_t namesz, descsz, type;
    std::memcpy(&namesz, data + pos, 4);
    std::memcpy(&descsz, data + pos + 4, 4);
    std::memcpy(&type, data + pos + 8, 4);
    size_t name_pos = pos + 12;
    size_t desc_pos = name_pos + align4(namesz);
    size_t next = desc_pos + align4(descsz);
    if (desc_pos > size || desc_pos + descsz > size || next <= pos) break;
    if (type == NT_GNU_BUILD_ID && namesz == 4 && std::memcmp(data + name_pos, "GNU", 4) == 0) {
      std::string hex;
      for (size_t i = 0; i < descsz; ++i) {
        hex.push_back(kHex[data[desc_pos + i] >> 4]);
        hex.push_back(kHex[data[desc_pos + i] & 15]);
      }
      return hex;
    }
    pos = next;
  }
  return "";
}

}  // namespace

void ElfImage::ElfDeleter::operator()(Elf* elf) const { elf_end(elf); }

ElfImage::ElfImage(ElfImage&& other) noexcept = default;
ElfImage& ElfImage::operator=(ElfImage&& other) noexcept {
  if (this != &other) {
    elf_.reset();  // before the bytes it reads
    mapping_ = std::move(other.mapping_);
    data_ = other.data_;
    size_ = other.size_;
    file_ = other.file_;
    elf_ = std::move(other.elf_);
    type_ = other.type_;
    is_64bit_ = other.is_64bit_;
    little_endian_ = other.little_endian_;
    load_segments_ = std::move(other.load_segments_);
  }
  return *this;
}
ElfImage::~ElfImage() { elf_.reset(); }

ElfImage ElfImage::WithoutLibelf() const {
  ElfImage copy;
  copy.mapping_ = mapping_;
  copy.data_ = data_;
  copy.size_ = size_;
  copy.file_ = file_;
  copy.type_ = type_;
  copy.is_64bit_ = is_64bit_;
  copy.little_endian_ = little_endian_;
  copy.load_segments_ = load_segments_;
  return copy;
}

Result<ElfImage> ElfImage::MapFd(int fd) {
  if (!InitLibelf()) return Status::Error("libelf initialisation failed: " + LibelfError());
  struct stat st;
  if (fstat(fd, &st) != 0) return Status::Error(std::string("fstat failed: ") + strerror(errno));
  if (!S_ISREG(st.st_mode)) return Status::Error("not a regular file");
  if (st.st_size == 0) return Status::Error("the file is empty");
  const size_t size = static_cast<size_t>(st.st_size);
  void* data = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (data == MAP_FAILED) return Status::Error(std::string("mmap failed: ") + strerror(errno));
  // Shares the page cache with every process that maps the file.
  std::shared_ptr<const uint8_t> mapping(
      static_cast<const uint8_t*>(data),
      [size](const uint8_t* p) { munmap(const_cast<uint8_t*>(p), size); });
  auto image = FromMemory(mapping.get(), size);
  if (!image.ok()) return image.status();
  image->mapping_ = std::move(mapping);
  image->file_ = FileStamp::Of(st);
  return image;
}

Result<ElfImage> ElfImage::FromMemory(const uint8_t* data, size_t size) {
  if (!InitLibelf()) return Status::Error("libelf initialisation failed: " + LibelfError());
  ElfImage image;
  // libelf only reads the image (what it must convert, it copies first).
  image.data_ = data;
  image.size_ = size;
  image.elf_.reset(elf_memory(reinterpret_cast<char*>(const_cast<uint8_t*>(data)), size));
  if (!image.elf_) return Status::Error("libelf cannot read the image: " + LibelfError());
  Status s = image.Load();
  if (!s.ok()) return s;
  return image;
}

Status ElfImage::Load() {
  Elf* e = elf_.get();
  if (elf_kind(e) != ELF_K_ELF) return Status::Error("not an ELF file");
  GElf_Ehdr ehdr;
  if (gelf_getehdr(e, &ehdr) == nullptr) {
    return Status::Error("cannot read the ELF header: " + LibelfError());
  }
  type_ = ehdr.e_type;
  is_64bit_ = ehdr.e_ident[EI_CLASS] == ELFCLASS64;
  little_endian_ = ehdr.e_ident[EI_DATA] == ELFDATA2LSB;

  size_t phnum = 0;
  if (elf_getphdrnum(e, &phnum) != 0) {
    return Status::Error("cannot read the program headers: " + LibelfError());
  }
  for (size_t i = 0; i < phnum; ++i) {
    GElf_Phdr phdr;
    if (gelf_getphdr(e, static_cast<int>(i), &phdr) == nullptr || phdr.p_type != PT_LOAD) continue;
    load_segments_.push_back(ElfLoadSegment{phdr.p_vaddr, phdr.p_offset, phdr.p_filesz,
                                            phdr.p_memsz, phdr.p_align, phdr.p_flags});
  }
  std::stable_sort(
      load_segments_.begin(), load_segments_.end(),
      [](const ElfLoadSegment& a, const ElfLoadSegment& b) { return a.vaddr < b.vaddr; });
  return Status::Ok();
}

std::string_view ElfImage::bytes() const {
  return std::string_view(reinterpret_cast<const char*>(data_), size_);
}

std::string_view ElfImage::Range(uint64_t offset, uint64_t size) const {
  if (offset >= size_) return {};
  return bytes().substr(offset, std::min<uint64_t>(size, size_ - offset));
}

const ElfLoadSegment* ElfImage::SegmentForVaddr(uint64_t vaddr) const {
  for (const auto& seg : load_segments_) {
    if (vaddr >= seg.vaddr && vaddr < seg.vaddr + seg.memsz) return &seg;
  }
  return nullptr;
}

std::optional<uint64_t> ElfImage::FileOffsetToVaddr(uint64_t offset) const {
  for (const auto& seg : load_segments_) {
    if (offset >= seg.offset && offset < seg.offset + seg.filesz) {
      return offset - seg.offset + seg.vaddr;
    }
  }
  // Not in any segment's file bytes (e.g. page-alignment slack before the
  // first byte of a segment): use the segment whose page range holds it.
  for (const auto& seg : load_segments_) {
    uint64_t page_start = seg.offset & ~(PageSize() - 1);
    if (offset >= page_start && offset < seg.offset + std::max(seg.filesz, seg.memsz)) {
      return offset - seg.offset + seg.vaddr;
    }
  }
  return std::nullopt;
}

const uint8_t* ElfImage::BytesAtVaddr(uint64_t vaddr, size_t len, bool allow_writable) const {
  for (const auto& seg : load_segments_) {
    if (vaddr < seg.vaddr || vaddr >= seg.vaddr + seg.filesz) continue;
    if (!allow_writable && (seg.flags & PF_W)) return nullptr;
    const uint64_t rel = vaddr - seg.vaddr;
    const uint64_t offset = seg.offset + rel;
    // Inside the segment's file bytes, and inside the image (a segment may
    // claim bytes past the end of a truncated file).
    if (len > seg.filesz - rel || offset > size_ || len > size_ - offset) return nullptr;
    return data_ + offset;
  }
  return nullptr;
}

std::optional<uint64_t> ElfImage::ProgramHeaderVaddr(uint32_t p_type) const {
  size_t phnum = 0;
  if (elf_getphdrnum(elf_.get(), &phnum) != 0) return std::nullopt;
  for (size_t i = 0; i < phnum; ++i) {
    GElf_Phdr phdr;
    if (gelf_getphdr(elf_.get(), static_cast<int>(i), &phdr) && phdr.p_type == p_type) {
      return phdr.p_vaddr;
    }
  }
  return std::nullopt;
}

bool ElfImage::has_sections() const { return elf_nextscn(elf_.get(), nullptr) != nullptr; }

Elf_Scn* ElfImage::FindSection(uint32_t sh_type) const {
  for (Elf_Scn* scn = elf_nextscn(elf_.get(), nullptr); scn; scn = elf_nextscn(elf_.get(), scn)) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) && shdr.sh_type == sh_type) return scn;
  }
  return nullptr;
}

Elf_Scn* ElfImage::FindSection(std::string_view name) const {
  size_t shstrndx;
  if (elf_getshdrstrndx(elf_.get(), &shstrndx) != 0) return nullptr;
  for (Elf_Scn* scn = elf_nextscn(elf_.get(), nullptr); scn; scn = elf_nextscn(elf_.get(), scn)) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr)) continue;
    const char* scn_name = elf_strptr(elf_.get(), shstrndx, shdr.sh_name);
    if (scn_name && name == scn_name) return scn;
  }
  return nullptr;
}

std::string_view ElfImage::SectionBytes(Elf_Scn* section) const {
  GElf_Shdr shdr;
  if (!section || !gelf_getshdr(section, &shdr) || shdr.sh_type == SHT_NOBITS) return {};
  return Range(shdr.sh_offset, shdr.sh_size);
}

std::string ElfImage::BuildId() const {
  for (Elf_Scn* scn = elf_nextscn(elf_.get(), nullptr); scn; scn = elf_nextscn(elf_.get(), scn)) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_NOTE) continue;
    std::string id = BuildIdFromNotes(SectionBytes(scn));
    if (!id.empty()) return id;
  }
  // No section headers (e.g. sstrip'ed): the PT_NOTE segments still hold it.
  size_t phnum = 0;
  if (elf_getphdrnum(elf_.get(), &phnum) != 0) return "";
  for (size_t i = 0; i < phnum; ++i) {
    GElf_Phdr phdr;
    if (!gelf_getphdr(elf_.get(), static_cast<int>(i), &phdr) || phdr.p_type != PT_NOTE) continue;
    std::string id = BuildIdFromNotes(Range(phdr.p_offset, phdr.p_filesz));
    if (!id.empty()) return id;
  }
  return "";
}

std::optional<uint64_t> ComputeLoadBias(const std::vector<ElfLoadSegment>& segments,
                                        uint64_t mapping_start, uint64_t mapping_offset) {
  // The loader maps each PT_LOAD from its page-aligned file offset to
  // bias + its page-aligned vaddr, so a mapping at that offset gives the bias.
  const uint64_t mask = ~(PageSize() - 1);
  for (const ElfLoadSegment& seg : segments) {
    if ((seg.offset & mask) == mapping_offset) return mapping_start - (seg.vaddr & mask);
  }
  return std::nullopt;
}

}  // namespace ebpf
