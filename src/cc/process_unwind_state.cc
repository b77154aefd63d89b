// Per-process unwinding state; see process_unwind_state.h.
#include "process_unwind_state.h"

#include <sys/auxv.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "elf_image_cache.h"
#include "proc_maps.h"

namespace ebpf {
namespace {

// What unw_create_addr_space + UNW_CACHE_GLOBAL costs in libunwind 1.6.2
// (measured with mallinfo2): mostly its register-state cache.
constexpr size_t kAddressSpaceBytes = 26 * 1024;

// Keeps the executable mappings of a /proc/PID/maps text, sorted by address.
void ParseExecMappings(std::string_view text, std::vector<ExecMapping>* maps,
                       std::vector<std::string>* paths) {
  maps->clear();
  paths->clear();
  auto parsed = ParseProcMaps(text);
  if (!parsed.ok()) return;
  for (const MemoryMapping& mapping : *parsed) {
    if (!mapping.executable()) continue;
    ExecMapping m;
    m.start = mapping.start;
    m.end = mapping.end;
    m.pgoff = mapping.offset;
    if (mapping.path == "[vdso]") {
      m.kind = ExecMapping::kVdso;
      m.file = kVdsoFileId;
    } else if (!mapping.is_file()) {
      m.kind = ExecMapping::kAnonymous;  // JIT code, [vsyscall], ...
    } else {
      m.kind = ExecMapping::kFile;
      m.file = mapping.file_id();
    }
    if (paths->empty() || paths->back() != mapping.path) paths->push_back(mapping.path);
    m.path = static_cast<uint32_t>(paths->size() - 1);
    maps->push_back(m);
  }
  std::sort(maps->begin(), maps->end(),
            [](const ExecMapping& a, const ExecMapping& b) { return a.start < b.start; });
}

// The vDSO has no file; every x86-64 process on this kernel maps the same
// image as we do, so ours is read (from memory) in its place.
std::pair<const uint8_t*, size_t> OwnVdsoImage() {
  static const std::pair<const uint8_t*, size_t> image = [] {
    std::pair<const uint8_t*, size_t> result{nullptr, 0};
    auto base = static_cast<uint64_t>(getauxval(AT_SYSINFO_EHDR));
    if (!base) return result;
    auto maps = ReadProcMaps(getpid());
    if (!maps.ok()) return result;
    for (const MemoryMapping& m : *maps) {
      if (m.start == base) {
        result = {reinterpret_cast<const uint8_t*>(base), static_cast<size_t>(m.size())};
        break;
      }
    }
    return result;
  }();
  return image;
}

}  // namespace

Result<std::unique_ptr<ProcessUnwindState>> ProcessUnwindState::Create(
    std::shared_ptr<TargetProcess> target, std::string* maps_buffer) {
  auto state = std::make_unique<ProcessUnwindState>();
  state->target = std::move(target);
  Status s = state->LoadMappings(maps_buffer);
  if (!s.ok()) return s;
  return state;
}

Status ProcessUnwindState::LoadMappings(std::string* maps_buffer) {
  auto text = target->ReadMaps(maps_buffer);
  if (!text.ok()) return text.status();
  ParseExecMappings(*text, &maps, &paths);
  last_hit_ = 0;
  return Status::Ok();
}

const ExecMapping* ProcessUnwindState::Find(uint64_t addr) {
  if (last_hit_ < maps.size()) {
    const ExecMapping& m = maps[last_hit_];
    if (addr >= m.start && addr < m.end) return &m;
  }
  auto it = std::upper_bound(maps.begin(), maps.end(), addr,
                             [](uint64_t a, const ExecMapping& m) { return a < m.start; });
  if (it == maps.begin()) return nullptr;
  --it;
  if (addr >= it->end) return nullptr;
  last_hit_ = static_cast<size_t>(it - maps.begin());
  return &*it;
}

Result<std::unique_ptr<NativeModule>> ProcessUnwindState::LoadModule(const ExecMapping& m,
                                                                     bool load_symbols,
                                                                     bool from_scratch) const {
  NativeModuleLoadOptions opts;
  opts.root = target->root();
  opts.path_in_root = path(m);
  opts.load_symbols = load_symbols;
  if (m.kind == ExecMapping::kVdso) {
    auto image = OwnVdsoImage();
    if (!image.first) return Status::Error("no vDSO in this process");
    return NativeModule::LoadFromMemory(image.first, image.second, opts);
  }
  auto file = target->OpenMappedFile(m.start, m.end, m.file.ino, path(m));
  if (!file.ok()) return file.status();
  if (from_scratch) {
    auto image = ElfImage::MapFd(file->fd.get());
    if (!image.ok()) return image.status();
    return NativeModule::Load(*image, opts);
  }
  // The file's one parse, shared with Python detection (elf_image_cache.h).
  auto image = ElfImageCache::Shared().Get(*file);
  if (!image.ok()) return image.status();
  return NativeModule::Load(**image, opts);
}

size_t ProcessUnwindState::memory_bytes() const {
  size_t bytes = kAddressSpaceBytes + sizeof(*this) + maps.capacity() * sizeof(ExecMapping);
  for (const auto& p : paths) bytes += sizeof(p) + p.capacity();
  return bytes;
}

}  // namespace ebpf
