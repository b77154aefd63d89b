// ElfFile on ElfImage; see elf_file.h.
#include "elf_file.h"

#include <elf.h>
#include <gelf.h>
#include <libelf.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "elf_image_cache.h"

namespace ebpf {
namespace {

std::string HexAddr(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

ElfFile::ElfFile(std::string path, std::shared_ptr<const ElfImage> image)
    : path_(std::move(path)), image_(std::move(image)) {
  has_symtab_ = image_->FindSection(uint32_t{SHT_SYMTAB}) != nullptr;
}

Result<ElfFile> ElfFile::Open(const std::string& path) {
  auto image = ElfImageCache::Shared().GetPath(path);
  if (!image.ok()) return image.status();
  return ElfFile(path, std::move(image).value());
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
    for (Elf_Scn* scn = elf_nextscn(image_->elf(), nullptr); scn && remaining > 0;
         scn = elf_nextscn(image_->elf(), scn)) {
      GElf_Shdr shdr;
      if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != table || shdr.sh_entsize == 0) continue;
      Elf_Data* syms = elf_getdata(scn, nullptr);
      Elf_Scn* str_scn = elf_getscn(image_->elf(), shdr.sh_link);
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

Status ElfFile::ReadAtVirtualAddress(uint64_t vaddr, void* out, size_t size) const {
  for (const ElfLoadSegment& seg : image_->load_segments()) {
    if (vaddr < seg.vaddr || vaddr - seg.vaddr > seg.memsz ||
        size > seg.memsz - (vaddr - seg.vaddr)) {
      continue;
    }
    const uint64_t delta = vaddr - seg.vaddr;
    // Bytes backed by the file, then zeros for the .bss part of the segment.
    const uint64_t in_file = delta >= seg.filesz ? 0 : std::min<uint64_t>(size, seg.filesz - delta);
    std::string_view bytes = image_->Range(seg.offset + delta, in_file);
    if (bytes.size() != in_file) {
      return Status::Error(path_ + " is truncated: cannot read " + std::to_string(size) +
                           " bytes at vaddr " + HexAddr(vaddr));
    }
    // An address in the .bss part has no file bytes: the view is then empty
    // and may be null, which memcpy must not be given even for 0 bytes.
    if (in_file > 0) std::memcpy(out, bytes.data(), bytes.size());
    std::memset(static_cast<char*>(out) + in_file, 0, size - in_file);
    return Status::Ok();
  }
  return Status::Error("virtual address " + HexAddr(vaddr) + " (+" + std::to_string(size) +
                       " bytes) is not inside one loadable segment of " + path_);
}

std::optional<std::string> ElfFile::BuildId() const {
  std::string id = image_->BuildId();
  if (id.empty()) return std::nullopt;
  return id;
}

void ElfFile::ForEachReadOnlyString(const std::function<bool(const ElfString&)>& visit) const {
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
  Elf* elf = image_->elf();
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_PROGBITS) continue;
    if (!(shdr.sh_flags & SHF_ALLOC) || (shdr.sh_flags & (SHF_WRITE | SHF_EXECINSTR))) continue;
    if (!scan(image_->SectionBytes(scn), shdr.sh_addr)) return;
  }
  if (image_->has_sections()) return;
  for (const ElfLoadSegment& seg : image_->load_segments()) {
    if ((seg.flags & (PF_W | PF_X)) != 0) continue;
    if (!scan(image_->Range(seg.offset, seg.filesz), seg.vaddr)) return;
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

}  // namespace ebpf
