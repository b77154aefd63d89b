// NativeModule: see native_module.h.
#include "native_module.h"

#include <elf.h>
#include <gelf.h>
#include <libelf.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "debug_file.h"
#include "elf_image_cache.h"

namespace ebpf {

namespace {

// DWARF pointer encodings (DW_EH_PE_*) used by .eh_frame_hdr.
constexpr uint8_t DW_EH_PE_absptr = 0x00, DW_EH_PE_udata2 = 0x02, DW_EH_PE_udata4 = 0x03,
                  DW_EH_PE_udata8 = 0x04, DW_EH_PE_sdata2 = 0x0a, DW_EH_PE_sdata4 = 0x0b,
                  DW_EH_PE_sdata8 = 0x0c, DW_EH_PE_pcrel = 0x10, DW_EH_PE_datarel = 0x30,
                  DW_EH_PE_omit = 0xff;

// Symbols collected from one or more ELF images before sorting.
struct SymbolCollector {
  std::vector<NativeModuleSymbol> symbols;
  std::string names;

  // Adds the function symbols of a SHT_SYMTAB/SHT_DYNSYM section (nullptr:
  // none); returns how many were added.
  size_t AddSection(const ElfImage& image, Elf_Scn* scn, SymbolSource source) {
    GElf_Shdr shdr;
    if (!scn || !gelf_getshdr(scn, &shdr) || shdr.sh_entsize == 0) return 0;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (!data) return 0;
    size_t count = shdr.sh_size / shdr.sh_entsize;
    size_t added = 0;
    for (size_t i = 0; i < count; ++i) {
      GElf_Sym sym;
      if (!gelf_getsym(data, static_cast<int>(i), &sym)) break;
      int type = GELF_ST_TYPE(sym.st_info);
      if (type != STT_FUNC && type != STT_GNU_IFUNC) continue;
      // A name is only ever given for an address inside the symbol, so
      // symbols without a size are useless here.
      if (sym.st_shndx == SHN_UNDEF || sym.st_size == 0 || sym.st_value == 0) continue;
      const char* name = elf_strptr(image.elf(), shdr.sh_link, sym.st_name);
      if (!name || !*name) continue;
      // "memcpy@GLIBC_2.2.5" / "f@@V2" in .symtab: the version is not part
      // of the function's name.
      size_t len = strcspn(name, "@");
      if (len == 0) continue;
      NativeModuleSymbol s;
      s.start = sym.st_value;
      s.size = sym.st_size;
      s.name = static_cast<uint32_t>(names.size());
      s.source = source;
      s.binding = static_cast<uint8_t>(GELF_ST_BIND(sym.st_info));
      names.append(name, len);
      names.push_back('\0');
      symbols.push_back(s);
      ++added;
    }
    return added;
  }
};

// Reads one DWARF EH pointer encoding as used in .eh_frame_hdr. `pc_vaddr` is
// the address of the value itself (for pcrel), `data_vaddr` the start of
// .eh_frame_hdr (for datarel). Returns false on unsupported encodings.
bool ReadEncoded(const uint8_t* p, const uint8_t* end, uint8_t enc, uint64_t pc_vaddr,
                 uint64_t data_vaddr, uint64_t* value, size_t* length) {
  if (enc == DW_EH_PE_omit) return false;
  uint64_t v = 0;
  size_t n = 0;
  switch (enc & 0x0f) {
    case DW_EH_PE_absptr:
    case DW_EH_PE_udata8:
    case DW_EH_PE_sdata8:
      n = 8;
      break;
    case DW_EH_PE_udata4:
    case DW_EH_PE_sdata4:
      n = 4;
      break;
    case DW_EH_PE_udata2:
    case DW_EH_PE_sdata2:
      n = 2;
      break;
    default:
      return false;
  }
  if (p + n > end) return false;
  if (n == 8) {
    memcpy(&v, p, 8);
  } else if (n == 4) {
    uint32_t u;
    memcpy(&u, p, 4);
    v = (enc & 0x0f) == DW_EH_PE_sdata4
            ? static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(u)))
            : u;
  } else {
    uint16_t u;
    memcpy(&u, p, 2);
    v = (enc & 0x0f) == DW_EH_PE_sdata2
            ? static_cast<uint64_t>(static_cast<int64_t>(static_cast<int16_t>(u)))
            : u;
  }
  switch (enc & 0x70) {
    case 0:
      break;
    case DW_EH_PE_pcrel:
      v += pc_vaddr;
      break;
    case DW_EH_PE_datarel:
      v += data_vaddr;
      break;
    default:
      return false;
  }
  *value = v;
  *length = n;
  return true;
}

}  // namespace

// Does the loading; a class so it may fill NativeModule's private members.
// `parsed` is the image with libelf's handle (sections, symbols, notes); the
// module keeps the same bytes without it.
class NativeModuleLoader {
 public:
  static Result<std::unique_ptr<NativeModule>> Load(const ElfImage& parsed,
                                                    const NativeModuleLoadOptions& options);

 private:
  static void LoadSymbols(NativeModule* module, const ElfImage& parsed,
                          const NativeModuleLoadOptions& options);
  static void LoadSeparateDebugSymbols(NativeModule* module, const ElfImage& parsed,
                                       const NativeModuleLoadOptions& options,
                                       SymbolCollector* collector);
  static void ParseUnwindTable(NativeModule* module, uint64_t eh_frame_hdr_vaddr);
};

Result<std::unique_ptr<NativeModule>> NativeModule::Load(const ElfImage& image,
                                                         const NativeModuleLoadOptions& options) {
  return NativeModuleLoader::Load(image, options);
}

Result<std::unique_ptr<NativeModule>> NativeModule::LoadFromPath(
    const std::string& path, const NativeModuleLoadOptions& options) {
  auto image = ElfImageCache::Shared().GetPath(path);
  if (!image.ok()) return image.status();
  auto result = Load(**image, options);
  if (!result.ok()) return Status::Error(path + ": " + result.error());
  return result;
}

Result<std::unique_ptr<NativeModule>> NativeModule::LoadFromMemory(
    const uint8_t* image, size_t size, const NativeModuleLoadOptions& options) {
  auto parsed = ElfImage::FromMemory(image, size);
  if (!parsed.ok()) return parsed.status();
  return Load(*parsed, options);
}

Result<std::unique_ptr<NativeModule>> NativeModuleLoader::Load(
    const ElfImage& parsed, const NativeModuleLoadOptions& options) {
  if (!parsed.is_64bit()) return Status::Error("not a 64-bit ELF file");
  if (parsed.load_segments().empty()) return Status::Error("no PT_LOAD segments");
  // What is kept is the bytes and the segments; libelf's per-section
  // bookkeeping would cost ~10 KiB for every cached module. Private
  // constructor: no make_unique.
  std::unique_ptr<NativeModule> module(new NativeModule(parsed.WithoutLibelf()));
  if (auto hdr = parsed.ProgramHeaderVaddr(PT_GNU_EH_FRAME)) {
    ParseUnwindTable(module.get(), *hdr);
  }
  module->build_id_ = parsed.BuildId();
  if (options.load_symbols) LoadSymbols(module.get(), parsed, options);
  return module;
}

void NativeModuleLoader::LoadSymbols(NativeModule* module, const ElfImage& image,
                                     const NativeModuleLoadOptions& options) {
  SymbolCollector collector;
  bool have_full_symtab = collector.AddSection(image, image.FindSection(uint32_t{SHT_SYMTAB}),
                                               SymbolSource::kSymtab) > 0;
  if (!have_full_symtab) LoadSeparateDebugSymbols(module, image, options, &collector);
  collector.AddSection(image, image.FindSection(uint32_t{SHT_DYNSYM}), SymbolSource::kDynsym);

  auto bind_rank = [](uint8_t b) { return b == STB_GLOBAL ? 0 : b == STB_WEAK ? 1 : 2; };
  // Stable: among equally ranked aliases the table's own order decides,
  // so every load of a file names an address the same way.
  std::stable_sort(collector.symbols.begin(), collector.symbols.end(),
                   [&](const NativeModuleSymbol& a, const NativeModuleSymbol& b) {
                     if (a.start != b.start) return a.start < b.start;
                     if (a.source != b.source) return a.source < b.source;
                     if (a.binding != b.binding) return bind_rank(a.binding) < bind_rank(b.binding);
                     return a.size > b.size;
                   });
  // Keep one symbol per (start, size): the best-ranked, which sorts first.
  auto& syms = collector.symbols;
  syms.erase(std::unique(syms.begin(), syms.end(),
                         [](const NativeModuleSymbol& a, const NativeModuleSymbol& b) {
                           return a.start == b.start && a.size == b.size;
                         }),
             syms.end());
  syms.shrink_to_fit();
  module->best_source_ = SymbolSource::kDynsym;
  for (const auto& s : syms) module->best_source_ = std::min(module->best_source_, s.source);
  module->max_end_.resize(syms.size());
  uint64_t max_end = 0;
  for (size_t i = 0; i < syms.size(); ++i) {
    max_end = std::max(max_end, syms[i].start + syms[i].size);
    module->max_end_[i] = max_end;
  }
  module->symbols_ = std::move(syms);
  module->names_ = std::move(collector.names);
  module->names_.shrink_to_fit();
}

void NativeModuleLoader::LoadSeparateDebugSymbols(NativeModule* module, const ElfImage& binary,
                                                  const NativeModuleLoadOptions& options,
                                                  SymbolCollector* collector) {
  DebugFileSearch search{options.root, options.path_in_root, options.search_host_debug_dirs};
  bool found = false;
  ForEachDebugFile(binary, module->build_id_, search,
                   [&](const std::string& path, const ElfImage& debug) {
                     Elf_Scn* symtab = debug.FindSection(uint32_t{SHT_SYMTAB});
                     found = collector->AddSection(debug, symtab, SymbolSource::kDebugFile) > 0;
                     if (found) module->debug_file_ = path;
                     return found;
                   });
  if (found) return;
  // MiniDebugInfo: an xz-compressed ELF holding the .symtab entries that are
  // not already in .dynsym (Fedora, RHEL).
  std::vector<uint8_t> storage;
  if (auto mini = MiniDebugInfo(binary, &storage); mini.ok()) {
    collector->AddSection(*mini, mini->FindSection(uint32_t{SHT_SYMTAB}), SymbolSource::kDebugData);
  }
}

void NativeModuleLoader::ParseUnwindTable(NativeModule* module, uint64_t hdr_vaddr) {
  // .eh_frame_hdr: version, eh_frame_ptr_enc, fde_count_enc, table_enc, then
  // the encoded eh_frame pointer, the encoded FDE count and the table.
  const ElfImage& image = module->image_;
  const uint8_t* hdr = image.BytesAtVaddr(hdr_vaddr, 4, true);
  const ElfLoadSegment* seg = image.SegmentForVaddr(hdr_vaddr);
  if (!hdr || hdr[0] != 1 || !seg) return;
  std::string_view seg_bytes = image.Range(seg->offset, seg->filesz);
  const auto* end = reinterpret_cast<const uint8_t*>(seg_bytes.data() + seg_bytes.size());
  uint64_t eh_frame_ptr = 0, fde_count = 0;
  size_t n1 = 0, n2 = 0;
  const uint8_t* p = hdr + 4;
  if (!ReadEncoded(p, end, hdr[1], hdr_vaddr + 4, hdr_vaddr, &eh_frame_ptr, &n1)) return;
  p += n1;
  if (!ReadEncoded(p, end, hdr[2], hdr_vaddr + 4 + n1, hdr_vaddr, &fde_count, &n2)) return;
  // libunwind's remote binary search reads (int32 start, int32 fde) pairs
  // relative to .eh_frame_hdr: the only table encoding it accepts.
  if (hdr[3] != (DW_EH_PE_datarel | DW_EH_PE_sdata4) || fde_count == 0) return;
  uint64_t table_vaddr = hdr_vaddr + 4 + n1 + n2;
  if (!image.BytesAtVaddr(table_vaddr, fde_count * 8, true)) return;
  module->unwind_table_.usable = true;
  module->unwind_table_.eh_frame_hdr_vaddr = hdr_vaddr;
  module->unwind_table_.table_vaddr = table_vaddr;
  module->unwind_table_.fde_count = fde_count;
}

const NativeModuleSymbol* NativeModule::FindSymbol(uint64_t vaddr) const {
  // Last symbol starting at or before vaddr, then walk back while an earlier
  // symbol could still reach vaddr (max_end_ says when none can).
  auto it = std::upper_bound(symbols_.begin(), symbols_.end(), vaddr,
                             [](uint64_t v, const NativeModuleSymbol& s) { return v < s.start; });
  size_t i = static_cast<size_t>(it - symbols_.begin());
  while (i > 0) {
    --i;
    if (max_end_[i] <= vaddr) return nullptr;
    const NativeModuleSymbol& s = symbols_[i];
    if (vaddr < s.start + s.size) {
      // Prefer the best-ranked symbol among those starting at the same address.
      while (i > 0 && symbols_[i - 1].start == s.start &&
             vaddr < symbols_[i - 1].start + symbols_[i - 1].size) {
        --i;
      }
      return &symbols_[i];
    }
  }
  return nullptr;
}

std::string_view NativeModule::SymbolName(const NativeModuleSymbol& symbol) const {
  return std::string_view(names_.data() + symbol.name);
}

size_t NativeModule::memory_bytes() const {
  return sizeof(*this) + symbols_.capacity() * sizeof(NativeModuleSymbol) +
         max_end_.capacity() * sizeof(uint64_t) + names_.capacity() +
         image_.load_segments().capacity() * sizeof(ElfLoadSegment) + build_id_.capacity() +
         debug_file_.capacity();
}

}  // namespace ebpf
