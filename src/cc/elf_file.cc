// ElfFile over libelf; see elf_file.h.
#include "elf_file.h"

#include <elf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace pyperf {
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

// The file image as libelf mapped it (ELF_C_READ_MMAP), for raw byte access.
std::string_view RawImage(Elf* elf) {
  size_t size = 0;
  const char* base = elf_rawfile(elf, &size);
  return base ? std::string_view(base, size) : std::string_view();
}

// Bytes [offset, offset+size) of the image, clipped to the image.
std::string_view ImageRange(std::string_view image, uint64_t offset, uint64_t size) {
  if (offset >= image.size()) return {};
  return image.substr(offset, std::min<uint64_t>(size, image.size() - offset));
}

std::string HexAddr(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

void ElfFile::ElfDeleter::operator()(Elf* elf) const { elf_end(elf); }

ElfFile::ElfFile(ElfFile&& other) noexcept { *this = std::move(other); }

ElfFile& ElfFile::operator=(ElfFile&& other) noexcept {
  if (this != &other) {
    elf_.reset();  // end the Elf before its fd is closed
    path_ = std::move(other.path_);
    fd_ = std::move(other.fd_);
    elf_ = std::move(other.elf_);
    type_ = other.type_;
    is_64bit_ = other.is_64bit_;
    little_endian_ = other.little_endian_;
    has_symtab_ = other.has_symtab_;
    load_segments_ = std::move(other.load_segments_);
  }
  return *this;
}

ElfFile::~ElfFile() { elf_.reset(); }

Result<ElfFile> ElfFile::Open(const std::string& path) {
  if (!InitLibelf()) return Status::Error("libelf initialisation failed: " + LibelfError());
  ElfFile file;
  file.path_ = path;
  file.fd_.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!file.fd_) {
    return Status::Error("cannot open ELF file " + path + ": " + std::strerror(errno));
  }
  Status s = file.Load();
  if (!s.ok()) return s;
  return file;
}

Status ElfFile::Load() {
  elf_.reset(elf_begin(fd_.get(), ELF_C_READ_MMAP, nullptr));
  if (!elf_) return Status::Error("libelf cannot read " + path_ + ": " + LibelfError());
  if (elf_kind(elf_.get()) != ELF_K_ELF) {
    return Status::Error(path_ + " is not an ELF file");
  }
  GElf_Ehdr ehdr;
  if (gelf_getehdr(elf_.get(), &ehdr) == nullptr) {
    return Status::Error("cannot read the ELF header of " + path_ + ": " + LibelfError());
  }
  type_ = ehdr.e_type;
  is_64bit_ = ehdr.e_ident[EI_CLASS] == ELFCLASS64;
  little_endian_ = ehdr.e_ident[EI_DATA] == ELFDATA2LSB;

  size_t phnum = 0;
  if (elf_getphdrnum(elf_.get(), &phnum) != 0) {
    return Status::Error("cannot read the program headers of " + path_ + ": " + LibelfError());
  }
  for (size_t i = 0; i < phnum; ++i) {
    GElf_Phdr phdr;
    if (gelf_getphdr(elf_.get(), static_cast<int>(i), &phdr) == nullptr) continue;
    if (phdr.p_type != PT_LOAD) continue;
    load_segments_.push_back(ElfLoadSegment{phdr.p_vaddr, phdr.p_offset, phdr.p_filesz,
                                            phdr.p_memsz, phdr.p_align, phdr.p_flags});
  }

  for (Elf_Scn* scn = elf_nextscn(elf_.get(), nullptr); scn; scn = elf_nextscn(elf_.get(), scn)) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) && shdr.sh_type == SHT_SYMTAB) has_symtab_ = true;
  }
  return Status::Ok();
}

std::optional<ElfSymbol> ElfFile::FindSymbol(std::string_view name) const {
  return FindSymbols({name})[0];
}

std::vector<std::optional<ElfSymbol>> ElfFile::FindSymbols(
    const std::vector<std::string_view>& names) const {
  std::vector<std::optional<ElfSymbol>> found(names.size());
  size_t remaining = names.size();
  // .dynsym before .symtab: the exported definition is the one other modules
  // bind to; .symtab adds the static symbols.
  for (Elf64_Word table : {SHT_DYNSYM, SHT_SYMTAB}) {
    for (Elf_Scn* scn = elf_nextscn(elf_.get(), nullptr); scn && remaining > 0;
         scn = elf_nextscn(elf_.get(), scn)) {
      GElf_Shdr shdr;
      if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != table || shdr.sh_entsize == 0) continue;
      Elf_Data* syms = elf_getdata(scn, nullptr);
      Elf_Scn* str_scn = elf_getscn(elf_.get(), shdr.sh_link);
      Elf_Data* strs = str_scn ? elf_getdata(str_scn, nullptr) : nullptr;
      if (!syms || !strs || !strs->d_buf) continue;
      const char* strtab = static_cast<const char*>(strs->d_buf);
      const size_t strtab_size = strs->d_size;
      const size_t count = shdr.sh_size / shdr.sh_entsize;
      for (size_t i = 0; i < count && remaining > 0; ++i) {
        GElf_Sym sym;
        if (!gelf_getsym(syms, static_cast<int>(i), &sym)) break;
        if (sym.st_shndx == SHN_UNDEF || sym.st_name >= strtab_size) continue;
        const char* start = strtab + sym.st_name;
        const void* nul = std::memchr(start, '\0', strtab_size - sym.st_name);
        if (!nul) continue;
        std::string_view sym_name(start,
                                  static_cast<size_t>(static_cast<const char*>(nul) - start));
        for (size_t n = 0; n < names.size(); ++n) {
          if (found[n] || names[n] != sym_name) continue;
          found[n] =
              ElfSymbol{sym.st_value, sym.st_size, static_cast<uint8_t>(GELF_ST_TYPE(sym.st_info)),
                        static_cast<uint8_t>(GELF_ST_BIND(sym.st_info)), table == SHT_DYNSYM};
          --remaining;
        }
      }
    }
  }
  return found;
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

Status ElfFile::ReadAtVirtualAddress(uint64_t vaddr, void* out, size_t size) const {
  for (const ElfLoadSegment& seg : load_segments_) {
    if (vaddr < seg.vaddr || vaddr - seg.vaddr > seg.memsz ||
        size > seg.memsz - (vaddr - seg.vaddr)) {
      continue;
    }
    const uint64_t delta = vaddr - seg.vaddr;
    // Bytes backed by the file, then zeros for the .bss part of the segment.
    const uint64_t in_file = delta >= seg.filesz ? 0 : std::min<uint64_t>(size, seg.filesz - delta);
    std::string_view bytes = ImageRange(RawImage(elf_.get()), seg.offset + delta, in_file);
    if (bytes.size() != in_file) {
      return Status::Error(path_ + " is truncated: cannot read " + std::to_string(size) +
                           " bytes at vaddr " + HexAddr(vaddr));
    }
    std::memcpy(out, bytes.data(), bytes.size());
    std::memset(static_cast<char*>(out) + in_file, 0, size - in_file);
    return Status::Ok();
  }
  return Status::Error("virtual address " + HexAddr(vaddr) + " (+" + std::to_string(size) +
                       " bytes) is not inside one loadable segment of " + path_);
}

std::optional<std::string> ElfFile::BuildId() const {
  auto from_notes = [](Elf_Data* data) -> std::optional<std::string> {
    if (!data || !data->d_buf) return std::nullopt;
    size_t offset = 0, name_off = 0, desc_off = 0;
    GElf_Nhdr nhdr;
    while ((offset = gelf_getnote(data, offset, &nhdr, &name_off, &desc_off)) > 0) {
      const char* base = static_cast<const char*>(data->d_buf);
      if (nhdr.n_type == NT_GNU_BUILD_ID && nhdr.n_namesz == 4 &&
          std::memcmp(base + name_off, "GNU", 4) == 0) {
        static const char kHex[] = "0123456789abcdef";
        std::string hex;
        for (size_t i = 0; i < nhdr.n_descsz; ++i) {
          auto byte = static_cast<unsigned char>(base[desc_off + i]);
          hex.push_back(kHex[byte >> 4]);
          hex.push_back(kHex[byte & 15]);
        }
        return hex;
      }
    }
    return std::nullopt;
  };
  bool any_section = false;
  for (Elf_Scn* scn = elf_nextscn(elf_.get(), nullptr); scn; scn = elf_nextscn(elf_.get(), scn)) {
    any_section = true;
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_NOTE) continue;
    if (auto id = from_notes(elf_getdata(scn, nullptr))) return id;
  }
  if (any_section) return std::nullopt;
  // No section headers (e.g. sstrip'ed): the PT_NOTE segments still hold it.
  size_t phnum = 0;
  if (elf_getphdrnum(elf_.get(), &phnum) != 0) return std::nullopt;
  for (size_t i = 0; i < phnum; ++i) {
    GElf_Phdr phdr;
    if (!gelf_getphdr(elf_.get(), static_cast<int>(i), &phdr) || phdr.p_type != PT_NOTE) continue;
    Elf_Data* data = elf_getdata_rawchunk(elf_.get(), static_cast<off_t>(phdr.p_offset),
                                          phdr.p_filesz, ELF_T_NHDR);
    if (auto id = from_notes(data)) return id;
  }
  return std::nullopt;
}

void ElfFile::ForEachReadOnlyString(const std::function<bool(const ElfString&)>& visit) const {
  const std::string_view image = RawImage(elf_.get());
  // Splits [bytes] at NULs; a trailing piece with no NUL is not a C string.
  auto scan = [&](std::string_view bytes, uint64_t vaddr) {
    size_t pos = 0;
    while (pos < bytes.size()) {
      size_t nul = bytes.find('\0', pos);
      if (nul == std::string_view::npos) break;
      if (nul > pos && !visit(ElfString{bytes.substr(pos, nul - pos), vaddr + pos})) return false;
      pos = nul + 1;
    }
    return true;
  };
  bool any_section = false;
  for (Elf_Scn* scn = elf_nextscn(elf_.get(), nullptr); scn; scn = elf_nextscn(elf_.get(), scn)) {
    any_section = true;
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_PROGBITS) continue;
    if (!(shdr.sh_flags & SHF_ALLOC) || (shdr.sh_flags & (SHF_WRITE | SHF_EXECINSTR))) continue;
    if (!scan(ImageRange(image, shdr.sh_offset, shdr.sh_size), shdr.sh_addr)) return;
  }
  if (any_section) return;
  for (const ElfLoadSegment& seg : load_segments_) {
    if ((seg.flags & (PF_W | PF_X)) != 0) continue;
    if (!scan(ImageRange(image, seg.offset, seg.filesz), seg.vaddr)) return;
  }
}

std::vector<ElfString> ElfFile::FindReadOnlyStrings(
    const std::function<bool(std::string_view)>& pred) const {
  std::vector<ElfString> found;
  ForEachReadOnlyString([&](const ElfString& s) {
    if (pred(s.text)) found.push_back(s);
    return true;
  });
  return found;
}

}  // namespace pyperf
