// Fuzz target: the ELF readers, _Py_DebugOffsets and Python detection over an
// arbitrary file (truncated, garbage, huge section or symbol counts, offsets
// pointing anywhere). The input is the file's bytes. Each run:
//  1. writes them to a new file in a scratch directory, named like an
//     interpreter (libpython3.so, libpython3.11.so.1.0, libpython2.7.so or
//     python3.13, chosen by the last byte), and maps it read-only into this
//     process, as a process maps its libpython;
//  2. runs Python detection on this process (PythonProcessInspector::Inspect:
//     /proc/self/maps, the mapped file's symbols, Py_Version, version
//     strings, load bias), and when it finds an interpreter,
//     OffsetsForProcess, which for 3.13+ reads _Py_DebugOffsets from the
//     mapping with process_vm_readv, checks and merges it;
//  3. opens the file with ElfFile (symbols by name, load bias, bytes at
//     addresses, build-id, read-only strings) and loads it as a NativeModule
//     (function symbols from .symtab, debug files, .gnu_debugdata, .dynsym;
//     the .eh_frame_hdr table), from the file and from memory, names
//     addresses in it as a native frame is named, and reads their call frame
//     information with EhFrameReader (the fast unwind's rules);
//  4. decodes the bytes as a _Py_DebugOffsets (for the version they claim,
//     3.13 and 3.14) and merges them with PyPerf's table.
// Checks: nothing crashes, reads out of bounds or leaks (ASan/UBSan); native
// frame names make lines gProfiler reads; merged offsets lie inside their
// structs, as MergeDebugOffsets promises.
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "FrameSpelling.h"
#include "PyDebugOffsets.h"
#include "PyOffsets.h"
#include "PythonProcess.h"
#include "eh_frame_reader.h"
#include "elf_file.h"
#include "fuzz_support.h"
#include "support/test_stack.h"
#include "native_frame_name.h"
#include "native_module.h"
#include "unique_fd.h"
#include "utf8.h"

namespace {

const char* const kFileNames[] = {"libpython3.so", "libpython3.11.so.1.0", "libpython2.7.so",
                                  "python3.13"};

// What MergeDebugOffsets promises of each field it takes from the
// interpreter: 0 <= value and value + width <= the struct's size.
void CheckMergedOffsets(const ebpf::pyperf::DebugOffsets& debug, const pyperf_offsets& merged) {
  for (const ebpf::pyperf::DebugOffsetsCoverage& c : ebpf::pyperf::DebugOffsetsCoverageTable()) {
    const pp_s64 value = merged.*c.member_of_offsets;
    const uint64_t size = debug.Get(c.size_member).value_or(0);
    PYPERF_FUZZ_CHECK(value >= 0, std::string(c.field) + " = " + std::to_string(value));
    PYPERF_FUZZ_CHECK(static_cast<unsigned __int128>(value) + c.width <= size,
                      std::string(c.field) + " = " + std::to_string(value) + " + " +
                          std::to_string(c.width) + " in a struct of " + std::to_string(size));
  }
  if (merged.runtime_interp_main >= 0) {
    const uint64_t size = debug.Get("runtime_state.size").value_or(0);
    PYPERF_FUZZ_CHECK(static_cast<unsigned __int128>(merged.runtime_interp_main) + 8 <= size,
                      "runtime_interp_main " + std::to_string(merged.runtime_interp_main));
  }
}

void DecodeDebugOffsets(const uint8_t* data, size_t size) {
  uint64_t hex = 0;
  if (size >= 16) std::memcpy(&hex, data + 8, 8);
  const ebpf::pyperf::PythonVersion claimed = ebpf::pyperf::PythonVersion::FromHex(hex);
  for (const ebpf::pyperf::PythonVersion& expected :
       {claimed, ebpf::pyperf::PythonVersion{3, 13, claimed.micro},
        ebpf::pyperf::PythonVersion{3, 14, claimed.micro}}) {
    auto debug = ebpf::pyperf::ParseDebugOffsets(expected, data, size);
    if (!debug.ok()) continue;
    PYPERF_FUZZ_CHECK(debug->version == expected, "version " + debug->version.ToString());
    const pyperf_offsets* table = ebpf::pyperf::FindOffsets(expected);
    if (!table) continue;
    auto merged = ebpf::pyperf::MergeDebugOffsets(*table, *debug);
    if (merged.ok()) CheckMergedOffsets(*debug, *merged);
  }
}

// A native frame's name for `vaddr` in `module`, spelled into a line.
void CheckNativeName(const ebpf::NativeModule* module, const std::string& path, uint64_t vaddr,
                     bool insert_dso_name) {
  std::string name;
  ebpf::FormatNativeFrameName(module, path, vaddr, insert_dso_name, &name);
  PYPERF_FUZZ_CHECK(ebpf::IsPrintableUtf8(name), "native name is not UTF-8");
  pyperf_fuzz::CheckProfileOutput(
      pyperf_test::Collapsed(pyperf_test::TestStack("fuzz", 1, 1).Native(name)) + " 1\n");
}

// Our .eh_frame reader over the file's call frame information (hostile
// tables, CIEs and instructions): an FDE found contains the address, and a
// rule's enumerations hold their declared values.
void ReadCallFrameInformation(const ebpf::NativeModule& module, uint64_t vaddr) {
  ebpf::EhFrameReader reader(module);
  const ebpf::EhFrameReader::FdeRange fde = reader.FindFde(vaddr);
  PYPERF_FUZZ_CHECK(!fde.found || (fde.pc_begin <= vaddr && vaddr < fde.pc_end),
                    "FindFde returned an FDE that does not contain the address");
  const ebpf::FrameRule rule = reader.RuleFor(vaddr);
  using Saved = ebpf::FrameRule::Saved;
  PYPERF_FUZZ_CHECK(!rule.simple || fde.found, "a rule without an FDE");
  PYPERF_FUZZ_CHECK(!rule.simple || (rule.rbp == Saved::kSame || rule.rbp == Saved::kAtCfa ||
                                     rule.rbp == Saved::kUndefined),
                    "a rule with an RBP rule out of range");
  PYPERF_FUZZ_CHECK(!rule.simple || rule.return_address != Saved::kSame,
                    "a rule whose return address keeps the callee's value");
}

void ReadWithNativeModule(const ebpf::NativeModule& module, const std::string& path) {
  size_t named = 0;
  for (const ebpf::NativeModuleSymbol& sym : module.symbols()) {
    if (++named > 64) break;
    // Names never lie: a symbol found for an address contains it.
    for (uint64_t vaddr : {sym.start, sym.start + sym.size / 2, sym.start + sym.size}) {
      const ebpf::NativeModuleSymbol* found = module.FindSymbol(vaddr);
      PYPERF_FUZZ_CHECK(!found || (found->start <= vaddr && vaddr - found->start < found->size),
                        "FindSymbol returned a symbol that does not contain the address");
    }
    CheckNativeName(&module, path, sym.start, named & 1);
    CheckNativeName(&module, path, sym.start + sym.size / 2, false);
    ReadCallFrameInformation(module, sym.start);
    ReadCallFrameInformation(module, sym.start + sym.size / 2);
  }
  for (const ebpf::ElfLoadSegment& seg : module.image().load_segments()) {
    module.FileOffsetToVaddr(seg.offset);
    module.image().BytesAtVaddr(seg.vaddr, 8, true);
    module.image().BytesAtVaddr(seg.vaddr + seg.filesz - 8, 8, false);
    CheckNativeName(&module, path, seg.vaddr, false);
  }
  CheckNativeName(nullptr, path, 0x1234, true);
}

void ReadWithElfFile(const std::string& path) {
  auto elf = ebpf::ElfFile::Open(path);
  if (!elf.ok()) return;
  auto syms = elf->FindSymbols({"_PyRuntime", "Py_Version", "PyCode_Type", "main", ""});
  for (const auto& sym : syms) {
    if (!sym) continue;
    uint8_t buf[64];
    (void)elf->ReadAtVirtualAddress(sym->value, buf, sym->size < sizeof(buf) ? sym->size : 8);
  }
  elf->FindSymbol("_PyThreadState_Current");
  for (const auto& seg : elf->load_segments()) {
    elf->LoadBias(0x7f0000000000, seg.offset & ~uint64_t{4095});
    uint8_t b[8];
    (void)elf->ReadAtVirtualAddress(seg.vaddr + seg.memsz - 4, b, sizeof(b));
  }
  elf->BuildId();
  ebpf::pyperf::FindPythonVersionStrings(*elf);
}

struct Mapping {
  void* base = nullptr;
  size_t size = 0;
};

// Maps the file as the dynamic loader maps a library: each PT_LOAD from its
// page-aligned file offset to its page-aligned address, all at one bias (read
// only: nothing here runs it). Headers it cannot lay out within 64 MiB (or no
// ELF header at all) get the whole file mapped once instead.
Mapping MapLikeLoader(const std::string& path, const uint8_t* data, size_t size) {
  Mapping out;
  if (size == 0) return out;
  ebpf::UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  PYPERF_FUZZ_CHECK(static_cast<bool>(fd), "open " + path);
  constexpr uint64_t kPage = 4096, kMask = ~(kPage - 1), kMaxSpan = uint64_t{64} << 20;
  std::vector<Elf64_Phdr> loads;
  Elf64_Ehdr ehdr;
  if (size >= sizeof(ehdr)) {
    std::memcpy(&ehdr, data, sizeof(ehdr));
    if (std::memcmp(ehdr.e_ident, ELFMAG, SELFMAG) == 0 && ehdr.e_phentsize == sizeof(Elf64_Phdr)) {
      for (uint64_t i = 0; i < ehdr.e_phnum && i < 64; ++i) {
        uint64_t at = ehdr.e_phoff + i * sizeof(Elf64_Phdr);
        if (at < ehdr.e_phoff || at > size || size - at < sizeof(Elf64_Phdr)) break;
        Elf64_Phdr ph;
        std::memcpy(&ph, data + at, sizeof(ph));
        if (ph.p_type == PT_LOAD && ph.p_filesz > 0) loads.push_back(ph);
      }
    }
  }
  uint64_t lo = UINT64_MAX, hi = 0;
  bool fits = !loads.empty();
  for (const Elf64_Phdr& ph : loads) {
    uint64_t end = ph.p_vaddr + ph.p_filesz;
    if (end < ph.p_vaddr || ph.p_offset > size) fits = false;
    lo = std::min(lo, ph.p_vaddr & kMask);
    hi = std::max(hi, end);
  }
  if (fits && hi > lo && hi - lo <= kMaxSpan) {
    size_t span = ((hi - lo) + kPage - 1) & kMask;
    void* base = mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    PYPERF_FUZZ_CHECK(base != MAP_FAILED, "reserving " + std::to_string(span) + " bytes");
    for (const Elf64_Phdr& ph : loads) {
      uint64_t addr = reinterpret_cast<uint64_t>(base) + (ph.p_vaddr & kMask) - lo;
      uint64_t len = (ph.p_vaddr & (kPage - 1)) + ph.p_filesz;
      len = std::min<uint64_t>(len, reinterpret_cast<uint64_t>(base) + span - addr);
      mmap(reinterpret_cast<void*>(addr), len, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd.get(),
           static_cast<off_t>(ph.p_offset & kMask));
    }
    return Mapping{base, span};
  }
  void* whole = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  PYPERF_FUZZ_CHECK(whole != MAP_FAILED, "mmap " + path);
  return Mapping{whole, size};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The inspector keeps what it learnt of this process's executable (read
  // once); files are keyed by inode, size and mtime, and tmpfs does not reuse
  // inode numbers, so each input's file is read afresh.
  static ebpf::pyperf::PythonProcessInspector inspector;
  static uint64_t counter = 0;
  const std::string name = kFileNames[size ? data[size - 1] % 4 : 0];
  const std::string dir = pyperf_fuzz::ScratchDir() + "/" + std::to_string(counter++);
  const std::string path = dir + "/" + name;
  PYPERF_FUZZ_CHECK(mkdir(dir.c_str(), 0700) == 0, "mkdir " + dir);
  {
    ebpf::UniqueFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    PYPERF_FUZZ_CHECK(static_cast<bool>(fd), "create " + path);
    size_t done = 0;
    while (done < size) {
      ssize_t n = write(fd.get(), data + done, size - done);
      PYPERF_FUZZ_CHECK(n > 0, "write " + path);
      done += static_cast<size_t>(n);
    }
  }

  // 1-2: mapped like a libpython, then detection on this process.
  Mapping mapping = MapLikeLoader(path, data, size);
  auto info = inspector.Inspect(getpid());
  if (pyperf_fuzz::Verbose()) {
    std::fprintf(stderr, "detection: %s\n",
                 info.ok()
                     ? ("CPython " + info->version.ToString() + " in " + info->module.path).c_str()
                     : info.error().c_str());
  }
  if (info.ok()) {
    PYPERF_FUZZ_CHECK(!info->module.host_path.empty(), "no host path");
    auto offsets = ebpf::pyperf::OffsetsForProcess(*info);
    if (offsets.ok()) PYPERF_FUZZ_CHECK(offsets->offsets != nullptr, "null offsets");
    if (pyperf_fuzz::Verbose()) {
      std::fprintf(stderr, "offsets: %s\n",
                   offsets.ok() ? offsets->source.c_str() : offsets.error().c_str());
    }
  }
  if (mapping.base) munmap(mapping.base, mapping.size);

  // 3: the ELF readers.
  ReadWithElfFile(path);
  ebpf::NativeModuleLoadOptions options;
  options.path_in_root = path;
  options.search_host_debug_dirs = false;
  if (auto module = ebpf::NativeModule::LoadFromPath(path, options); module.ok()) {
    ReadWithNativeModule(**module, path);
  }
  if (size > 0) {
    options.path_in_root.clear();
    if (auto module = ebpf::NativeModule::LoadFromMemory(data, size, options); module.ok()) {
      ReadWithNativeModule(**module, "[vdso]");
    }
  }

  // 4: the bytes as a _Py_DebugOffsets.
  DecodeDebugOffsets(data, size);

  unlink(path.c_str());
  rmdir(dir.c_str());
  return 0;
}
