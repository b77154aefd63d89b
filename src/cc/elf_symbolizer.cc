// ElfSymbolizer: see elf_symbolizer.h.
#include "elf_symbolizer.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "unique_fd.h"
#include "utf8.h"

namespace pyperf {

namespace {

// DWARF pointer encodings (DW_EH_PE_*) used by .eh_frame_hdr.
constexpr uint8_t DW_EH_PE_absptr = 0x00, DW_EH_PE_udata2 = 0x02, DW_EH_PE_udata4 = 0x03,
                  DW_EH_PE_udata8 = 0x04, DW_EH_PE_sdata2 = 0x0a, DW_EH_PE_sdata4 = 0x0b,
                  DW_EH_PE_sdata8 = 0x0c, DW_EH_PE_pcrel = 0x10, DW_EH_PE_datarel = 0x30,
                  DW_EH_PE_omit = 0xff;

// A read-only private mapping of a whole file, unmapped on destruction.
class FileMapping {
 public:
  FileMapping() = default;
  FileMapping(const FileMapping&) = delete;
  FileMapping& operator=(const FileMapping&) = delete;
  ~FileMapping() { Reset(); }

  Status Map(int fd, size_t size) {
    Reset();
    if (size == 0) return Status::Error("the file is empty");
    void* p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) return Status::Error(std::string("mmap failed: ") + strerror(errno));
    data_ = static_cast<const uint8_t*>(p);
    size_ = size;
    return Status::Ok();
  }
  // Hands the mapping over to the caller (who must munmap it).
  const uint8_t* Release() {
    const uint8_t* d = data_;
    data_ = nullptr;
    size_ = 0;
    return d;
  }
  void Reset() {
    if (data_) munmap(const_cast<uint8_t*>(data_), size_);
    data_ = nullptr;
    size_ = 0;
  }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

struct ElfCloser {
  void operator()(Elf* e) const { elf_end(e); }
};
using ElfHandle = std::unique_ptr<Elf, ElfCloser>;

ElfHandle OpenElfImage(const uint8_t* image, size_t size) {
  static const bool version_ok = elf_version(EV_CURRENT) != EV_NONE;
  if (!version_ok) return nullptr;
  // elf_memory with read-only use never writes into the image.
  ElfHandle e(elf_memory(reinterpret_cast<char*>(const_cast<uint8_t*>(image)), size));
  if (!e || elf_kind(e.get()) != ELF_K_ELF || gelf_getclass(e.get()) != ELFCLASS64) return nullptr;
  return e;
}

// Symbols collected from one or more ELF images before sorting.
struct SymbolCollector {
  std::vector<NativeModuleSymbol> symbols;
  std::string names;

  // Adds the function symbols of a SHT_SYMTAB/SHT_DYNSYM section; returns how
  // many were added.
  size_t AddSection(Elf* e, Elf_Scn* scn, SymbolSource source) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr) || shdr.sh_entsize == 0) return 0;
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
      const char* name = elf_strptr(e, shdr.sh_link, sym.st_name);
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

Elf_Scn* FindSectionByType(Elf* e, Elf64_Word type) {
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(e, scn)) != nullptr) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) && shdr.sh_type == type) return scn;
  }
  return nullptr;
}

Elf_Scn* FindSectionByName(Elf* e, const char* wanted) {
  size_t shstrndx;
  if (elf_getshdrstrndx(e, &shstrndx) != 0) return nullptr;
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(e, scn)) != nullptr) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr)) continue;
    const char* name = elf_strptr(e, shstrndx, shdr.sh_name);
    if (name && strcmp(name, wanted) == 0) return scn;
  }
  return nullptr;
}

// Parses ELF notes in [data, data+size) looking for the GNU build-id.
std::string BuildIdFromNotes(const uint8_t* data, size_t size) {
  static const char kHex[] = "0123456789abcdef";
  size_t pos = 0;
  auto align4 = [](size_t v) { return (v + 3) & ~size_t{3}; };
  while (pos + 12 <= size) {
    uint32_t namesz, descsz, type;
    memcpy(&namesz, data + pos, 4);
    memcpy(&descsz, data + pos + 4, 4);
    memcpy(&type, data + pos + 8, 4);
    size_t name_pos = pos + 12;
    size_t desc_pos = name_pos + align4(namesz);
    size_t next = desc_pos + align4(descsz);
    if (desc_pos > size || desc_pos + descsz > size || next <= pos) break;
    if (type == NT_GNU_BUILD_ID && namesz == 4 && memcmp(data + name_pos, "GNU", 4) == 0) {
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

std::string ReadBuildId(Elf* e) {
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(e, scn)) != nullptr) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_NOTE) continue;
    Elf_Data* data = elf_rawdata(scn, nullptr);
    if (!data || !data->d_buf) continue;
    std::string id = BuildIdFromNotes(static_cast<const uint8_t*>(data->d_buf), data->d_size);
    if (!id.empty()) return id;
  }
  // No section headers (sstrip'ed files): fall back to PT_NOTE segments.
  size_t phnum = 0;
  if (elf_getphdrnum(e, &phnum) != 0) return "";
  for (size_t i = 0; i < phnum; ++i) {
    GElf_Phdr phdr;
    if (!gelf_getphdr(e, static_cast<int>(i), &phdr) || phdr.p_type != PT_NOTE) continue;
    Elf_Data* data = elf_getdata_rawchunk(e, phdr.p_offset, phdr.p_filesz, ELF_T_BYTE);
    if (!data || !data->d_buf) continue;
    std::string id = BuildIdFromNotes(static_cast<const uint8_t*>(data->d_buf), data->d_size);
    if (!id.empty()) return id;
  }
  return "";
}

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

// liblzma, loaded on first use: Debian's libunwind already depends on
// liblzma.so.5, so it is always installed where PyPerf runs, and loading it
// lazily keeps it out of the link line.
using LzmaStreamBufferDecodeFn = int (*)(uint64_t* memlimit, uint32_t flags, const void* allocator,
                                         const uint8_t* in, size_t* in_pos, size_t in_size,
                                         uint8_t* out, size_t* out_pos, size_t out_size);
LzmaStreamBufferDecodeFn LzmaDecoder() {
  static LzmaStreamBufferDecodeFn fn = [] {
    void* handle = dlopen("liblzma.so.5", RTLD_NOW | RTLD_LOCAL);
    if (!handle) return LzmaStreamBufferDecodeFn{nullptr};
    return reinterpret_cast<LzmaStreamBufferDecodeFn>(dlsym(handle, "lzma_stream_buffer_decode"));
  }();
  return fn;
}

// Decompresses an .xz stream (.gnu_debugdata). Returns false if liblzma is
// missing or the data is not valid.
bool DecompressXz(const uint8_t* in, size_t in_size, std::vector<uint8_t>* out) {
  LzmaStreamBufferDecodeFn decode = LzmaDecoder();
  if (!decode) return false;
  constexpr int kLzmaOk = 0, kLzmaBufError = 10;
  size_t capacity = std::max<size_t>(in_size * 8, 64 * 1024);
  constexpr size_t kMaxSize = size_t{512} << 20;
  while (capacity <= kMaxSize) {
    out->resize(capacity);
    uint64_t memlimit = UINT64_MAX;
    size_t in_pos = 0, out_pos = 0;
    int ret =
        decode(&memlimit, 0, nullptr, in, &in_pos, in_size, out->data(), &out_pos, out->size());
    if (ret == kLzmaOk) {
      out->resize(out_pos);
      return true;
    }
    if (ret != kLzmaBufError) return false;
    capacity *= 2;
  }
  return false;
}

std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return "";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string JoinRoot(const std::string& root, const std::string& path) {
  if (root.empty() || root == "/") return path;
  return root + path;
}

bool SameFile(const struct stat& a, dev_t dev, ino_t ino) {
  return a.st_dev == dev && a.st_ino == ino;
}

}  // namespace

const char* SymbolSourceName(SymbolSource source) {
  switch (source) {
    case SymbolSource::kSymtab:
      return "symtab";
    case SymbolSource::kDebugFile:
      return "debug file";
    case SymbolSource::kDebugData:
      return "gnu_debugdata";
    case SymbolSource::kDynsym:
      return "dynsym";
  }
  return "?";
}

uint32_t DebuglinkCrc32(uint32_t crc, const uint8_t* data, size_t len) {
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  crc = ~crc;
  for (size_t i = 0; i < len; ++i) crc = table[(crc ^ data[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

// Does the loading; a class so it may fill NativeModule's private members.
class NativeModuleLoader {
 public:
  static Result<std::unique_ptr<NativeModule>> Load(const uint8_t* image, size_t size,
                                                    bool owns_image, const struct stat* st,
                                                    const NativeModuleLoadOptions& options);

 private:
  struct DebugFileCandidate {
    std::string path;
    bool check_crc = false;
    uint32_t crc = 0;
  };
  static void LoadDebugFileSymbols(Elf* e, NativeModule* module, const struct stat* st,
                                   const NativeModuleLoadOptions& options,
                                   SymbolCollector* collector);
  static void ParseUnwindTable(NativeModule* module, uint64_t eh_frame_hdr_vaddr);
};

Result<std::unique_ptr<NativeModule>> NativeModule::LoadFromFd(
    int fd, const NativeModuleLoadOptions& options) {
  struct stat st;
  if (fstat(fd, &st) != 0) return Status::Error(std::string("fstat failed: ") + strerror(errno));
  if (!S_ISREG(st.st_mode)) return Status::Error("not a regular file");
  FileMapping mapping;
  Status mapped = mapping.Map(fd, static_cast<size_t>(st.st_size));
  if (!mapped.ok()) return mapped;
  auto result = NativeModuleLoader::Load(mapping.data(), mapping.size(), true, &st, options);
  if (result.ok()) mapping.Release();  // now owned by the module
  return result;
}

Result<std::unique_ptr<NativeModule>> NativeModule::LoadFromPath(
    const std::string& path, const NativeModuleLoadOptions& options) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return Status::Error("cannot open " + path + ": " + strerror(errno));
  auto result = LoadFromFd(fd.get(), options);
  if (!result.ok()) return Status::Error(path + ": " + result.error());
  return result;
}

Result<std::unique_ptr<NativeModule>> NativeModule::LoadFromMemory(
    const uint8_t* image, size_t size, const NativeModuleLoadOptions& options) {
  return NativeModuleLoader::Load(image, size, false, nullptr, options);
}

NativeModule::~NativeModule() {
  if (owns_image_ && image_) munmap(const_cast<uint8_t*>(image_), image_size_);
}

Result<std::unique_ptr<NativeModule>> NativeModuleLoader::Load(
    const uint8_t* image, size_t size, bool owns_image, const struct stat* st,
    const NativeModuleLoadOptions& options) {
  ElfHandle elf = OpenElfImage(image, size);
  if (!elf) return Status::Error("not a 64-bit ELF file");
  Elf* e = elf.get();

  std::unique_ptr<NativeModule> module(new NativeModule());  // private constructor
  if (st) {
    module->file_size_ = static_cast<uint64_t>(st->st_size);
    module->file_mtime_ns_ =
        static_cast<int64_t>(st->st_mtim.tv_sec) * 1000000000 + st->st_mtim.tv_nsec;
  }

  size_t phnum = 0;
  if (elf_getphdrnum(e, &phnum) != 0) return Status::Error("cannot read program headers");
  uint64_t eh_frame_hdr_vaddr = 0;
  bool has_eh_frame_hdr = false;
  for (size_t i = 0; i < phnum; ++i) {
    GElf_Phdr phdr;
    if (!gelf_getphdr(e, static_cast<int>(i), &phdr)) continue;
    if (phdr.p_type == PT_LOAD) {
      NativeModuleSegment seg;
      seg.vaddr = phdr.p_vaddr;
      seg.memsz = phdr.p_memsz;
      seg.offset = phdr.p_offset;
      seg.filesz = phdr.p_filesz;
      seg.flags = phdr.p_flags;
      // A segment claiming bytes past the end of the file is not served.
      if (seg.offset > size)
        seg.filesz = 0;
      else if (seg.offset + seg.filesz > size)
        seg.filesz = size - seg.offset;
      module->segments_.push_back(seg);
    } else if (phdr.p_type == PT_GNU_EH_FRAME) {
      eh_frame_hdr_vaddr = phdr.p_vaddr;
      has_eh_frame_hdr = true;
    }
  }
  if (module->segments_.empty()) return Status::Error("no PT_LOAD segments");
  std::sort(
      module->segments_.begin(), module->segments_.end(),
      [](const NativeModuleSegment& a, const NativeModuleSegment& b) { return a.vaddr < b.vaddr; });

  // The image must be set before ImageBytes is used below.
  module->image_ = image;
  module->image_size_ = size;
  module->owns_image_ = false;  // set at the end, once loading can no longer fail

  if (has_eh_frame_hdr) ParseUnwindTable(module.get(), eh_frame_hdr_vaddr);
  module->build_id_ = ReadBuildId(e);

  if (options.load_symbols) {
    SymbolCollector collector;
    bool have_full_symtab = false;
    if (Elf_Scn* symtab = FindSectionByType(e, SHT_SYMTAB)) {
      have_full_symtab = collector.AddSection(e, symtab, SymbolSource::kSymtab) > 0;
    }
    if (!have_full_symtab) LoadDebugFileSymbols(e, module.get(), st, options, &collector);
    if (Elf_Scn* dynsym = FindSectionByType(e, SHT_DYNSYM)) {
      collector.AddSection(e, dynsym, SymbolSource::kDynsym);
    }

    auto bind_rank = [](uint8_t b) { return b == STB_GLOBAL ? 0 : b == STB_WEAK ? 1 : 2; };
    // Stable: among equally ranked aliases the table's own order decides,
    // so every load of a file names an address the same way.
    std::stable_sort(collector.symbols.begin(), collector.symbols.end(),
                     [&](const NativeModuleSymbol& a, const NativeModuleSymbol& b) {
                       if (a.start != b.start) return a.start < b.start;
                       if (a.source != b.source) return a.source < b.source;
                       if (a.binding != b.binding)
                         return bind_rank(a.binding) < bind_rank(b.binding);
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
  module->owns_image_ = owns_image;
  return module;
}

void NativeModuleLoader::ParseUnwindTable(NativeModule* module, uint64_t hdr_vaddr) {
  // .eh_frame_hdr: version, eh_frame_ptr_enc, fde_count_enc, table_enc, then
  // the encoded eh_frame pointer, the encoded FDE count and the table.
  const uint8_t* hdr = module->ImageBytes(hdr_vaddr, 4, true);
  if (!hdr || hdr[0] != 1) return;
  const NativeModuleSegment* seg = module->SegmentForVaddr(hdr_vaddr);
  if (!seg) return;
  const uint8_t* end = module->image_ + seg->offset + seg->filesz;
  uint64_t eh_frame_ptr = 0, fde_count = 0;
  size_t n1 = 0, n2 = 0;
  const uint8_t* p = hdr + 4;
  if (!ReadEncoded(p, end, hdr[1], hdr_vaddr + 4, hdr_vaddr, &eh_frame_ptr, &n1)) return;
  p += n1;
  if (!ReadEncoded(p, end, hdr[2], hdr_vaddr + 4 + n1, hdr_vaddr, &fde_count, &n2)) return;
  p += n2;
  // libunwind's remote binary search reads (int32 start, int32 fde) pairs
  // relative to .eh_frame_hdr: the only table encoding it accepts.
  if (hdr[3] != (DW_EH_PE_datarel | DW_EH_PE_sdata4) || fde_count == 0) return;
  uint64_t table_vaddr = hdr_vaddr + 4 + n1 + n2;
  if (!module->ImageBytes(table_vaddr, fde_count * 8, true)) return;
  module->unwind_table_.usable = true;
  module->unwind_table_.eh_frame_hdr_vaddr = hdr_vaddr;
  module->unwind_table_.table_vaddr = table_vaddr;
  module->unwind_table_.fde_count = fde_count;
}

void NativeModuleLoader::LoadDebugFileSymbols(Elf* e, NativeModule* module, const struct stat* st,
                                              const NativeModuleLoadOptions& options,
                                              SymbolCollector* collector) {
  std::vector<DebugFileCandidate> candidates;
  const bool other_root = !options.root.empty() && options.root != "/";
  const std::string& build_id = module->build_id_;
  if (build_id.size() > 2) {
    std::string rel =
        "/usr/lib/debug/.build-id/" + build_id.substr(0, 2) + "/" + build_id.substr(2) + ".debug";
    candidates.push_back({JoinRoot(options.root, rel)});
    if (other_root && options.search_host_debug_dirs) candidates.push_back({rel});
  }
  if (Elf_Scn* link = FindSectionByName(e, ".gnu_debuglink")) {
    Elf_Data* data = elf_rawdata(link, nullptr);
    if (data && data->d_buf && data->d_size > 4) {
      const char* name = static_cast<const char*>(data->d_buf);
      size_t name_len = strnlen(name, data->d_size);
      size_t crc_pos = (name_len + 1 + 3) & ~size_t{3};
      if (name_len > 0 && crc_pos + 4 <= data->d_size) {
        uint32_t crc;
        memcpy(&crc, static_cast<const uint8_t*>(data->d_buf) + crc_pos, 4);
        std::string file(name, name_len);
        std::string dir = DirName(options.path_in_root);
        if (!dir.empty()) {
          std::string sep = dir == "/" ? "" : "/";
          candidates.push_back({JoinRoot(options.root, dir + sep + file), true, crc});
          candidates.push_back({JoinRoot(options.root, dir + sep + ".debug/" + file), true, crc});
          candidates.push_back(
              {JoinRoot(options.root, "/usr/lib/debug" + dir + sep + file), true, crc});
          if (other_root && options.search_host_debug_dirs) {
            candidates.push_back({"/usr/lib/debug" + dir + sep + file, true, crc});
          }
        }
      }
    }
  }

  for (const auto& candidate : candidates) {
    UniqueFd fd(open(candidate.path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) continue;
    struct stat dst;
    if (fstat(fd.get(), &dst) != 0 || !S_ISREG(dst.st_mode) || dst.st_size == 0) continue;
    if (st && SameFile(dst, st->st_dev, st->st_ino)) continue;  // the file itself
    FileMapping mapping;
    if (!mapping.Map(fd.get(), static_cast<size_t>(dst.st_size)).ok()) continue;
    ElfHandle debug = OpenElfImage(mapping.data(), mapping.size());
    if (!debug) continue;
    // A debug file must belong to this very build: same build-id when the
    // file has one, otherwise the CRC .gnu_debuglink records.
    if (!build_id.empty()) {
      if (ReadBuildId(debug.get()) != build_id) continue;
    } else if (candidate.check_crc) {
      if (DebuglinkCrc32(0, mapping.data(), mapping.size()) != candidate.crc) continue;
    }
    Elf_Scn* symtab = FindSectionByType(debug.get(), SHT_SYMTAB);
    if (!symtab) continue;
    if (collector->AddSection(debug.get(), symtab, SymbolSource::kDebugFile) > 0) {
      module->debug_file_ = candidate.path;
      return;
    }
  }

  // MiniDebugInfo: an xz-compressed ELF holding the .symtab entries that are
  // not already in .dynsym (Fedora, RHEL).
  if (Elf_Scn* debugdata = FindSectionByName(e, ".gnu_debugdata")) {
    Elf_Data* data = elf_rawdata(debugdata, nullptr);
    std::vector<uint8_t> decompressed;
    if (data && data->d_buf &&
        DecompressXz(static_cast<const uint8_t*>(data->d_buf), data->d_size, &decompressed)) {
      ElfHandle mini = OpenElfImage(decompressed.data(), decompressed.size());
      if (mini) {
        if (Elf_Scn* symtab = FindSectionByType(mini.get(), SHT_SYMTAB)) {
          collector->AddSection(mini.get(), symtab, SymbolSource::kDebugData);
        }
      }
    }
  }
}

std::optional<uint64_t> NativeModule::FileOffsetToVaddr(uint64_t offset) const {
  for (const auto& seg : segments_) {
    if (offset >= seg.offset && offset < seg.offset + seg.filesz) {
      return offset - seg.offset + seg.vaddr;
    }
  }
  // Not in any segment's file bytes (e.g. page-alignment slack before the
  // first byte of a segment): use the segment whose page range holds it.
  for (const auto& seg : segments_) {
    uint64_t page_start = seg.offset & ~uint64_t{0xfff};
    if (offset >= page_start && offset < seg.offset + std::max(seg.filesz, seg.memsz)) {
      return offset - seg.offset + seg.vaddr;
    }
  }
  return std::nullopt;
}

const NativeModuleSegment* NativeModule::SegmentForVaddr(uint64_t vaddr) const {
  for (const auto& seg : segments_) {
    if (vaddr >= seg.vaddr && vaddr < seg.vaddr + seg.memsz) return &seg;
  }
  return nullptr;
}

const uint8_t* NativeModule::ImageBytes(uint64_t vaddr, size_t len, bool allow_writable) const {
  if (!image_) return nullptr;
  for (const auto& seg : segments_) {
    if (vaddr < seg.vaddr || vaddr >= seg.vaddr + seg.filesz) continue;
    if (!allow_writable && (seg.flags & PF_W)) return nullptr;
    uint64_t rel = vaddr - seg.vaddr;
    if (len > seg.filesz - rel) return nullptr;
    return image_ + seg.offset + rel;
  }
  return nullptr;
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
         segments_.capacity() * sizeof(NativeModuleSegment) + build_id_.capacity() +
         debug_file_.capacity();
}

std::string DemangleSymbol(std::string_view name) {
  if (name.size() < 2 || name[0] != '_' || name[1] != 'Z') return std::string(name);
  std::string mangled(name);
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  if (status != 0 || !demangled) {
    free(demangled);
    return mangled;
  }
  std::string result(demangled);
  free(demangled);
  return result;
}

std::string_view ModuleBasename(std::string_view path) {
  constexpr std::string_view kDeleted = " (deleted)";
  if (path.size() > kDeleted.size() && path.substr(path.size() - kDeleted.size()) == kDeleted) {
    path.remove_suffix(kDeleted.size());
  }
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

namespace {
std::string_view WithoutDeleted(std::string_view path) {
  constexpr std::string_view kDeleted = " (deleted)";
  if (path.size() > kDeleted.size() && path.substr(path.size() - kDeleted.size()) == kDeleted) {
    path.remove_suffix(kDeleted.size());
  }
  return path;
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
        out->append(WithoutDeleted(module_path));
        out->push_back(')');
      }
      // Symbol tables and paths are bytes: what is printed is UTF-8.
      SanitizeUtf8InPlace(out);
      return true;
    }
  }
  out->append(insert_dso_name ? WithoutDeleted(module_path) : ModuleBasename(module_path));
  char hex[24];
  snprintf(hex, sizeof(hex), "+0x%" PRIx64, vaddr);
  out->append(hex);
  SanitizeUtf8InPlace(out);
  return false;
}

void FormatUnreadableModuleFrameName(std::string_view module_path, bool insert_dso_name,
                                     std::string* out) {
  out->assign("[unknown] (");
  out->append(insert_dso_name ? WithoutDeleted(module_path) : ModuleBasename(module_path));
  out->push_back(')');
  SanitizeUtf8InPlace(out);
}

}  // namespace pyperf
