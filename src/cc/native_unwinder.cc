// NativeUnwinder: see native_unwinder.h.
#include "native_unwinder.h"

#include <fcntl.h>
#include <libunwind.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "native_frame_name.h"
#include "native_module.h"
#include "native_module_cache.h"
#include "proc_maps.h"
#include "proc_name_cache.h"
#include "process_memory.h"
#include "read_file.h"
#include "unique_fd.h"

// Exported by libunwind-x86_64 (1.6.2) but not declared in its public headers:
// the remote binary search over an .eh_frame_hdr table described by an
// unw_dyn_info_t. Linux perf declares and uses it the same way.
extern "C" int _Ux86_64_dwarf_search_unwind_table(unw_addr_space_t as, unw_word_t ip,
                                                  unw_dyn_info_t* di, unw_proc_info_t* pi,
                                                  int need_unwind_info, void* arg);

namespace pyperf {

namespace {

constexpr std::string_view kUnknownFrame = "[unknown]";
// What unw_create_addr_space + UNW_CACHE_GLOBAL costs in libunwind 1.6.2
// (measured with mallinfo2): mostly its register-state cache.
constexpr size_t kAddressSpaceBytes = 26 * 1024;

// One executable mapping of a process.
struct ExecMapping {
  enum Kind : uint8_t { kFile, kVdso, kAnonymous };
  uint64_t start = 0, end = 0, pgoff = 0;
  FileId file;
  uint32_t path = 0;  // index into ProcessState::paths
  Kind kind = kFile;
};

// Reads a process's identity into *id, using *buffer for the file's text
// (reused, so the per-round checks allocate nothing). Returns errno or 0.
int ReadProcIdentity(pid_t pid, std::string* buffer, ProcessIdentity* id) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  if (int err = ReadFileInto(path, buffer); err != 0) return err;
  if (buffer->empty()) return ESRCH;
  auto parsed = ParseProcessIdentity(*buffer);
  if (!parsed.ok()) return EINVAL;
  *id = *parsed;
  return 0;
}

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
      m.file = FileId{static_cast<uint64_t>(makedev(mapping.dev_major, mapping.dev_minor)),
                      mapping.inode};
    }
    if (paths->empty() || paths->back() != mapping.path) paths->push_back(mapping.path);
    m.path = static_cast<uint32_t>(paths->size() - 1);
    maps->push_back(m);
  }
  std::sort(maps->begin(), maps->end(),
            [](const ExecMapping& a, const ExecMapping& b) { return a.start < b.start; });
}

struct AddrSpaceDeleter {
  void operator()(unw_addr_space* as) const { unw_destroy_addr_space(as); }
};
using AddrSpace = std::unique_ptr<unw_addr_space, AddrSpaceDeleter>;

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

// Everything known about one process.
struct ProcessState {
  pid_t pid = 0;
  bool recorded = false;
  std::string root;  // "/proc/PID/root", or a recorded snapshot's root ("" = host)
  ProcessIdentity identity;
  uint64_t process_key = 0;
  std::vector<ExecMapping> maps;
  std::vector<std::string> paths;
  AddrSpace address_space;
  uint64_t last_used_round = 0;
  // Re-reads of the mappings this round (bounded: an ip that no mapping
  // explains must not cost a /proc read on every sample).
  uint64_t refresh_round = 0;
  uint32_t refreshes_this_round = 0;
  size_t last_hit = 0;
  bool flush_unwind_cache = false;

  const ExecMapping* Find(uint64_t addr) {
    if (last_hit < maps.size()) {
      const ExecMapping& m = maps[last_hit];
      if (addr >= m.start && addr < m.end) return &m;
    }
    auto it = std::upper_bound(maps.begin(), maps.end(), addr,
                               [](uint64_t a, const ExecMapping& m) { return a < m.start; });
    if (it == maps.begin()) return nullptr;
    --it;
    if (addr >= it->end) return nullptr;
    last_hit = static_cast<size_t>(it - maps.begin());
    return &*it;
  }
};

// Per-Unwind state handed to libunwind's accessors as their `arg`.
struct UnwindCall {
  NativeUnwinder::Impl* impl = nullptr;
  const NativeSnapshot* snapshot = nullptr;
  ProcessState* process = nullptr;
  bool cached = true;
  // Modules libunwind is reading unwind tables from: their read-only bytes are
  // served from the file image instead of the target's memory.
  struct Served {
    std::shared_ptr<const NativeModule> module;
    uint64_t bias = 0;
  };
  std::array<Served, 4> served;
  size_t served_next = 0;
  // Filled by the get_proc_name accessor (uncached path) for the frame being named.
  struct NameInfo {
    bool mapped = false;
    bool module_ok = false;
    uint64_t vaddr = 0;
    uint32_t path = 0;
    std::shared_ptr<const NativeModule> module;
  } name_info;

  void Serve(std::shared_ptr<const NativeModule> module, uint64_t bias) {
    for (auto& s : served) {
      if (s.module == module && s.bias == bias) return;
    }
    served[served_next] = Served{std::move(module), bias};
    served_next = (served_next + 1) % served.size();
  }
};

}  // namespace

class NativeUnwinder::Impl {
 public:
  explicit Impl(NativeUnwinderOptions options)
      : options_(std::move(options)),
        names_(options_.name_cache_limits),
        modules_(options_.module_cache_limits) {
    for (const auto& s : options_.stop_symbols) stop_symbols_.insert(s);
    accessors_.find_proc_info = &Impl::FindProcInfo;
    accessors_.put_unwind_info = &Impl::PutUnwindInfo;
    accessors_.get_dyn_info_list_addr = &Impl::GetDynInfoListAddr;
    accessors_.access_mem = &Impl::AccessMem;
    accessors_.access_reg = &Impl::AccessReg;
    accessors_.access_fpreg = &Impl::AccessFpreg;
    accessors_.resume = &Impl::Resume;
    accessors_.get_proc_name = &Impl::GetProcName;
  }

  NativeUnwindResult Unwind(const NativeSnapshot& snapshot, std::vector<NativeFrame>* out);
  void CacheEviction();
  NativeUnwinderStats Stats() const;
  void ForgetProcess(pid_t pid) {
    if (processes_.erase(pid)) ++processes_dropped_;
    recorded_.erase(pid);
  }
  Status AddRecordedProcess(pid_t pid, std::string maps_text, std::string root_dir) {
    if (pid <= 0) return Status::Error("a recorded process needs a pid > 0");
    ForgetProcess(pid);
    recorded_[pid] = Recorded{std::move(maps_text), std::move(root_dir)};
    return Status::Ok();
  }

  NativeUnwinderOptions options_;
  ProcNameCache names_;
  NativeModuleCache modules_;

 private:
  struct Recorded {
    std::string maps;
    std::string root;
  };
  enum class Refresh { kRefreshed, kGone, kReplaced };

  // Output frames, reusing the strings of earlier calls.
  class FrameWriter {
   public:
    FrameWriter(std::vector<NativeFrame>* out, std::vector<std::string>* spare)
        : out_(out), spare_(spare) {}
    NativeFrame& Next() {
      if (n_ == out_->size()) {
        out_->emplace_back();
        if (!spare_->empty()) {
          out_->back().name = std::move(spare_->back());
          spare_->pop_back();
        }
      }
      NativeFrame& f = (*out_)[n_++];
      f.name.clear();
      f.address = f.elf_address = 0;
      f.symbolized = f.error = false;
      return f;
    }
    void Finish() {
      for (size_t i = n_; i < out_->size(); ++i) spare_->push_back(std::move((*out_)[i].name));
      out_->resize(n_);
    }
    size_t size() const { return n_; }

   private:
    std::vector<NativeFrame>* out_;
    std::vector<std::string>* spare_;
    size_t n_ = 0;
  };

  void AddMarker(FrameWriter* w, NativeUnwindResult* result, const char* what,
                 std::string_view reason) {
    NativeFrame& f = w->Next();
    if (reason.empty()) {
      f.name.assign(what);
    } else {
      f.name.assign("[Error ");
      f.name.append(what);
      f.name.append(" (");
      f.name.append(reason);
      f.name.append(")]");
    }
    f.error = true;
    result->error = true;
  }

  bool IsStopSymbol(std::string_view raw) const {
    if (stop_symbols_.empty()) return false;
    std::string name(raw);
    if (stop_symbols_.count(name)) return true;
    return raw.size() > 2 && raw[0] == '_' && raw[1] == 'Z' &&
           stop_symbols_.count(DemangleSymbol(raw));
  }

  // --- processes ---
  Status LoadMappings(ProcessState* p) {
    ++maps_reads_;
    if (p->recorded) {
      auto it = recorded_.find(p->pid);
      if (it == recorded_.end()) return Status::Error("recorded process is gone");
      ParseExecMappings(it->second.maps, &p->maps, &p->paths);
    } else {
      char path[64];
      snprintf(path, sizeof(path), "/proc/%d/maps", static_cast<int>(p->pid));
      int err = ReadFileInto(path, &maps_buffer_);
      if (err != 0) return Status::Error(strerror(err));
      if (maps_buffer_.empty()) return Status::Error("no mappings (process exited)");
      ParseExecMappings(maps_buffer_, &p->maps, &p->paths);
    }
    p->last_hit = 0;
    return Status::Ok();
  }

  // Builds a process's state from scratch (the caller owns it).
  Result<std::unique_ptr<ProcessState>> NewProcess(pid_t pid) {
    auto p = std::make_unique<ProcessState>();
    p->pid = pid;
    auto rec = recorded_.find(pid);
    if (rec != recorded_.end()) {
      p->recorded = true;
      p->root = rec->second.root;
    } else {
      p->root = "/proc/" + std::to_string(pid) + "/root";
      int err = ReadProcIdentity(pid, &proc_buffer_, &p->identity);
      if (err != 0) return Status::Error(strerror(err));
    }
    Status s = LoadMappings(p.get());
    if (!s.ok()) return s;
    return p;
  }

  // Drops cached modules whose device+inode now names a different file (an
  // inode reused after an upgrade), and retries files that failed to load.
  void VerifyModules(const ProcessState& p) {
    if (p.recorded) return;
    for (const ExecMapping& m : p.maps) {
      if (m.kind != ExecMapping::kFile) continue;
      const CachedModule* cached = modules_.Peek(m.file);
      if (!cached) continue;
      if (!cached->module) {
        modules_.Erase(m.file);
        continue;
      }
      char path[96];
      snprintf(path, sizeof(path), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64,
               static_cast<int>(p.pid), m.start, m.end);
      struct stat st;
      if (stat(path, &st) != 0) continue;  // cannot tell; keep
      int64_t mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
      if (static_cast<uint64_t>(st.st_size) != cached->module->file_size() ||
          mtime != cached->module->file_mtime_ns()) {
        modules_.Erase(m.file);
        names_.EraseFile(m.file);
      }
    }
  }

  ProcessState* GetProcess(const NativeSnapshot& s, std::string* error) {
    auto it = processes_.find(s.pid);
    if (it != processes_.end()) {
      ProcessState& p = *it->second;
      if (s.process_key != 0 && p.process_key != 0 && s.process_key != p.process_key) {
        processes_.erase(it);  // a new program image under the same pid
        ++processes_dropped_;
      } else {
        if (p.process_key == 0) p.process_key = s.process_key;
        p.last_used_round = round_;
        return &p;
      }
    }
    auto created = NewProcess(s.pid);
    if (!created.ok()) {
      *error = created.error();
      return nullptr;
    }
    std::unique_ptr<ProcessState> p = std::move(created).value();
    p->process_key = s.process_key;
    p->last_used_round = round_;
    p->address_space.reset(unw_create_addr_space(&accessors_, 0));
    if (!p->address_space) {
      *error = "unw_create_addr_space failed";
      return nullptr;
    }
    // Per address space, so cached register states never cross processes.
    unw_set_caching_policy(p->address_space.get(), UNW_CACHE_GLOBAL);
    VerifyModules(*p);
    ProcessState* raw = p.get();
    processes_[s.pid] = std::move(p);
    return raw;
  }

  static constexpr uint32_t kMaxRefreshesPerRound = 4;
  bool MayRefresh(ProcessState* p) {
    if (p->recorded) return false;
    if (p->refresh_round != round_) {
      p->refresh_round = round_;
      p->refreshes_this_round = 0;
    }
    return p->refreshes_this_round < kMaxRefreshesPerRound;
  }

  // Re-reads a live process's mappings (a few times per round at most),
  // noticing a pid reuse or an exec on the way.
  Refresh RefreshProcess(ProcessState* p) {
    ++p->refreshes_this_round;
    ProcessIdentity now;
    if (ReadProcIdentity(p->pid, &proc_buffer_, &now) != 0) return Refresh::kGone;
    if (now != p->identity) return Refresh::kReplaced;
    if (!LoadMappings(p).ok()) return Refresh::kGone;
    VerifyModules(*p);
    p->flush_unwind_cache = true;
    return Refresh::kRefreshed;
  }

  const ExecMapping* FindMapping(UnwindCall* call, uint64_t addr) {
    ProcessState* p = call->process;
    if (const ExecMapping* m = p->Find(addr)) return m;
    if (!call->cached || !MayRefresh(p)) return nullptr;
    if (RefreshProcess(p) != Refresh::kRefreshed) return nullptr;
    return p->Find(addr);
  }

  // --- modules ---
  Result<std::unique_ptr<NativeModule>> LoadModule(const ProcessState& p, const ExecMapping& m,
                                                   bool load_symbols) {
    NativeModuleLoadOptions opts;
    opts.root = p.root;
    opts.path_in_root = p.paths[m.path];
    opts.load_symbols = load_symbols;
    if (m.kind == ExecMapping::kVdso) {
      auto image = OwnVdsoImage();
      if (!image.first) return Status::Error("no vDSO in this process");
      return NativeModule::LoadFromMemory(image.first, image.second, opts);
    }
    UniqueFd fd;
    if (!p.recorded) {
      // map_files names the mapped file itself: right even when the path was
      // replaced or deleted since, and inside containers.
      char mf[96];
      snprintf(mf, sizeof(mf), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, static_cast<int>(p.pid),
               m.start, m.end);
      fd.reset(open(mf, O_RDONLY | O_CLOEXEC));
    }
    if (!fd) {
      std::string full =
          p.root.empty() || p.root == "/" ? opts.path_in_root : p.root + opts.path_in_root;
      fd.reset(open(full.c_str(), O_RDONLY | O_CLOEXEC));
      if (!fd) return Status::Error("cannot open " + full + ": " + strerror(errno));
      if (!p.recorded) {
        struct stat st;
        if (fstat(fd.get(), &st) != 0 || static_cast<uint64_t>(st.st_ino) != m.file.ino) {
          return Status::Error(full + " is no longer the mapped file");
        }
      }
    }
    return NativeModule::LoadFromFd(fd.get(), opts);
  }

  std::shared_ptr<const NativeModule> ModuleFor(UnwindCall* call, const ExecMapping& m,
                                                bool need_symbols) {
    if (!call->cached) {
      // From scratch, as the old path did for every frame.
      auto loaded = LoadModule(*call->process, m, need_symbols);
      if (!loaded.ok()) return nullptr;
      return std::shared_ptr<const NativeModule>(std::move(loaded).value());
    }
    if (const CachedModule* c = modules_.Lookup(m.file)) return c->module;
    auto loaded = LoadModule(*call->process, m, true);
    CachedModule entry;
    if (loaded.ok())
      entry.module = std::shared_ptr<const NativeModule>(std::move(loaded).value());
    else
      entry.error = loaded.error();
    return modules_.Insert(m.file, std::move(entry))->module;
  }

  // --- naming ---
  const CachedName* ResolveCached(UnwindCall* call, uint64_t addr) {
    const ExecMapping* m = FindMapping(call, addr);
    if (!m || m->kind == ExecMapping::kAnonymous) return &unknown_name_;
    NameKey key{m->file, addr - m->start + m->pgoff};
    if (const CachedName* hit = names_.Lookup(key)) return hit;
    const ExecMapping mapping = *m;  // a refresh inside ModuleFor may move it
    std::shared_ptr<const NativeModule> module = ModuleFor(call, mapping, true);
    CachedName entry;
    MakeName(module.get(), call->process->paths[mapping.path], key.offset, &entry);
    return names_.Insert(key, std::move(entry));
  }

  void MakeName(const NativeModule* module, const std::string& path, uint64_t file_offset,
                CachedName* out) {
    std::optional<uint64_t> vaddr;
    if (module) vaddr = module->FileOffsetToVaddr(file_offset);
    if (!vaddr) {
      FormatUnreadableModuleFrameName(path, options_.insert_dso_name, &out->text);
      return;
    }
    out->elf_vaddr = *vaddr;
    out->symbolized =
        FormatNativeFrameName(module, path, *vaddr, options_.insert_dso_name, &out->text);
    if (out->symbolized) {
      out->is_stop = IsStopSymbol(module->SymbolName(*module->FindSymbol(*vaddr)));
    }
  }

  NativeUnwindResult UnwindCached(const NativeSnapshot& s, FrameWriter* w);
  NativeUnwindResult UnwindUncached(const NativeSnapshot& s, FrameWriter* w);

  // --- libunwind accessors ---
  static int FindProcInfo(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t* pi,
                          int need_unwind_info, void* arg) {
    auto* call = static_cast<UnwindCall*>(arg);
    Impl* self = call->impl;
    const ExecMapping* found = self->FindMapping(call, ip);
    if (!found || found->kind == ExecMapping::kAnonymous) return -UNW_ENOINFO;
    const ExecMapping m = *found;
    std::shared_ptr<const NativeModule> module = self->ModuleFor(call, m, false);
    if (!module) return -UNW_ENOINFO;
    std::optional<uint64_t> vaddr = module->FileOffsetToVaddr(ip - m.start + m.pgoff);
    if (!vaddr) return -UNW_ENOINFO;
    const UnwindTableLocation& table = module->unwind_table();
    const ElfLoadSegment* text = module->image().SegmentForVaddr(*vaddr);
    if (!table.usable || !text) return -UNW_ENOINFO;
    uint64_t bias = ip - *vaddr;
    call->Serve(module, bias);
    unw_dyn_info_t di;
    memset(&di, 0, sizeof(di));
    di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
    di.start_ip = bias + text->vaddr;
    di.end_ip = di.start_ip + text->memsz;
    di.u.rti.segbase = bias + table.eh_frame_hdr_vaddr;
    di.u.rti.table_data = bias + table.table_vaddr;
    // (int32 start, int32 fde) pairs, counted in words as libunwind expects.
    di.u.rti.table_len = table.fde_count * 8 / sizeof(unw_word_t);
    return _Ux86_64_dwarf_search_unwind_table(as, ip, &di, pi, need_unwind_info, arg);
  }

  // DWARF unwind info is freed by libunwind itself; nothing of ours to release.
  static void PutUnwindInfo(unw_addr_space_t, unw_proc_info_t*, void*) {}

  // No dynamically registered unwind info (JIT registration) is read.
  static int GetDynInfoListAddr(unw_addr_space_t, unw_word_t*, void*) { return -UNW_ENOINFO; }

  static int AccessMem(unw_addr_space_t, unw_word_t addr, unw_word_t* val, int write, void* arg) {
    if (write) return -UNW_EINVAL;
    auto* call = static_cast<UnwindCall*>(arg);
    const NativeSnapshot& s = *call->snapshot;
    if (addr >= s.sp && addr - s.sp <= s.stack_len && s.stack_len - (addr - s.sp) >= sizeof(*val)) {
      memcpy(val, s.stack + (addr - s.sp), sizeof(*val));
      return 0;
    }
    const bool recorded = call->process->recorded;
    for (const auto& served : call->served) {
      if (!served.module) continue;
      // Live processes: only read-only segments equal the file. Recorded
      // ones have nothing better than the file for the rest either.
      if (const uint8_t* p =
              served.module->image().BytesAtVaddr(addr - served.bias, sizeof(*val), recorded)) {
        memcpy(val, p, sizeof(*val));
        return 0;
      }
    }
    if (recorded) return -UNW_EINVAL;
    ++call->impl->remote_reads_;
    return ReadProcessMemory(s.pid, addr, val, sizeof(*val)) ? 0 : -UNW_EINVAL;
  }

  static int AccessReg(unw_addr_space_t, unw_regnum_t reg, unw_word_t* val, int write, void* arg) {
    if (write) return -UNW_EINVAL;
    const NativeSnapshot& s = *static_cast<UnwindCall*>(arg)->snapshot;
    switch (reg) {
      case UNW_X86_64_RIP:
        *val = s.ip;
        return 0;
      case UNW_X86_64_RSP:
        *val = s.sp;
        return 0;
      case UNW_X86_64_RBP:
        *val = s.bp;
        return 0;
      default:
        return -UNW_EBADREG;  // not in the snapshot
    }
  }

  static int AccessFpreg(unw_addr_space_t, unw_regnum_t, unw_fpreg_t*, int, void*) {
    return -UNW_EINVAL;
  }
  static int Resume(unw_addr_space_t, unw_cursor_t*, void*) { return -UNW_EINVAL; }

  // Only the uncached path calls unw_get_proc_name; it names from scratch.
  static int GetProcName(unw_addr_space_t, unw_word_t addr, char* buf, size_t len,
                         unw_word_t* offset, void* arg) {
    auto* call = static_cast<UnwindCall*>(arg);
    Impl* self = call->impl;
    auto& info = call->name_info;
    info = UnwindCall::NameInfo();
    const ExecMapping* found = self->FindMapping(call, addr);
    if (!found || found->kind == ExecMapping::kAnonymous) return -UNW_ENOINFO;
    const ExecMapping m = *found;
    info.mapped = true;
    info.path = m.path;
    info.module = self->ModuleFor(call, m, true);
    if (!info.module) return -UNW_ENOINFO;
    std::optional<uint64_t> vaddr = info.module->FileOffsetToVaddr(addr - m.start + m.pgoff);
    if (!vaddr) return -UNW_ENOINFO;
    info.module_ok = true;
    info.vaddr = *vaddr;
    const NativeModuleSymbol* sym = info.module->FindSymbol(*vaddr);
    if (!sym) return -UNW_ENOINFO;
    std::string_view name = info.module->SymbolName(*sym);
    if (len == 0) return -UNW_ENOMEM;
    size_t n = std::min(name.size(), len - 1);
    memcpy(buf, name.data(), n);
    buf[n] = '\0';
    *offset = *vaddr - sym->start;
    return n == name.size() ? 0 : -UNW_ENOMEM;
  }

  unw_accessors_t accessors_{};
  std::unordered_set<std::string> stop_symbols_;
  std::unordered_map<pid_t, std::unique_ptr<ProcessState>> processes_;
  std::unordered_map<pid_t, Recorded> recorded_;
  std::string maps_buffer_;
  std::string proc_buffer_;  // /proc/PID/stat text
  std::vector<std::string> spare_names_;
  std::string scratch_;
  CachedName unknown_name_{std::string(kUnknownFrame), 0, false, false};
  uint64_t round_ = 0;
  uint64_t processes_dropped_ = 0;
  uint64_t maps_reads_ = 0;
  uint64_t unwinds_ = 0;
  uint64_t frames_ = 0;
  uint64_t errors_ = 0;
  uint64_t remote_reads_ = 0;

  friend class NativeUnwinder;
};

NativeUnwindResult NativeUnwinder::Impl::Unwind(const NativeSnapshot& snapshot,
                                                std::vector<NativeFrame>* out) {
  ++unwinds_;
  FrameWriter w(out, &spare_names_);
  NativeUnwindResult result;
  NativeSnapshot s = snapshot;
  if (!s.stack) s.stack_len = 0;
  if (s.ip == 0 || s.sp == 0 || s.pid <= 0) {
    AddMarker(&w, &result, "(missing)", "");
  } else if (options_.cache_enabled) {
    result = UnwindCached(s, &w);
  } else {
    result = UnwindUncached(s, &w);
  }
  w.Finish();
  frames_ += out->size();
  if (result.error) ++errors_;
  return result;
}

NativeUnwindResult NativeUnwinder::Impl::UnwindCached(const NativeSnapshot& s, FrameWriter* w) {
  NativeUnwindResult result;
  std::string error;
  ProcessState* p = GetProcess(s, &error);
  if (!p) {
    AddMarker(w, &result, "reading process mappings", error);
    return result;
  }
  // An ip outside every known mapping: new code was mapped, or the pid is
  // now another process. Check before libunwind holds any state.
  if (!p->Find(s.ip) && MayRefresh(p) && RefreshProcess(p) == Refresh::kReplaced) {
    processes_.erase(s.pid);
    ++processes_dropped_;
    p = GetProcess(s, &error);
    if (!p) {
      AddMarker(w, &result, "reading process mappings", error);
      return result;
    }
  }
  if (p->flush_unwind_cache) {
    unw_flush_cache(p->address_space.get(), 0, 0);
    p->flush_unwind_cache = false;
  }

  UnwindCall call;
  call.impl = this;
  call.snapshot = &s;
  call.process = p;
  call.cached = true;
  unw_cursor_t cursor;
  int ret = unw_init_remote(&cursor, p->address_space.get(), &call);
  if (ret < 0) {
    AddMarker(w, &result, "unw_init_remote", unw_strerror(ret));
    return result;
  }
  for (size_t depth = 0;; ++depth) {
    unw_word_t ip = 0;
    ret = unw_get_reg(&cursor, UNW_REG_IP, &ip);
    if (ret < 0) {
      AddMarker(w, &result, "unw_get_reg", unw_strerror(ret));
      break;
    }
    if (ip == 0) break;
    // A return address is just past the call; ip-1 is inside the caller
    // (and inside the function even when the call was its last instruction).
    uint64_t addr = depth == 0 ? ip : ip - 1;
    const CachedName* name = ResolveCached(&call, addr);
    NativeFrame& f = w->Next();
    f.name.assign(name->text);
    f.address = addr;
    f.elf_address = name->elf_vaddr;
    f.symbolized = name->symbolized;
    if (name->is_stop) {
      result.reached_stop = true;
      break;
    }
    if (w->size() >= options_.max_depth) {
      result.truncated = true;
      break;
    }
    ret = unw_step(&cursor);
    if (ret == 0) break;  // the outermost frame
    if (ret < 0) {
      AddMarker(w, &result, "unw_step", unw_strerror(ret));
      break;
    }
  }
  return result;
}

NativeUnwindResult NativeUnwinder::Impl::UnwindUncached(const NativeSnapshot& s, FrameWriter* w) {
  NativeUnwindResult result;
  // Everything from scratch, as PyPerf did per sample before these caches.
  auto created = NewProcess(s.pid);
  if (!created.ok()) {
    AddMarker(w, &result, "reading process mappings", created.error());
    return result;
  }
  std::unique_ptr<ProcessState> p = std::move(created).value();
  AddrSpace as(unw_create_addr_space(&accessors_, 0));
  if (!as) {
    AddMarker(w, &result, "unw_create_addr_space", "out of memory");
    return result;
  }
  unw_set_caching_policy(as.get(), UNW_CACHE_NONE);
  UnwindCall call;
  call.impl = this;
  call.snapshot = &s;
  call.process = p.get();
  call.cached = false;
  unw_cursor_t cursor;
  int ret = unw_init_remote(&cursor, as.get(), &call);
  if (ret < 0) {
    AddMarker(w, &result, "unw_init_remote", unw_strerror(ret));
    return result;
  }
  char buf[1024];
  for (size_t depth = 0;; ++depth) {
    unw_word_t ip = 0;
    ret = unw_get_reg(&cursor, UNW_REG_IP, &ip);
    if (ret < 0) {
      AddMarker(w, &result, "unw_get_reg", unw_strerror(ret));
      break;
    }
    if (ip == 0) break;
    unw_word_t offset = 0;
    call.name_info = UnwindCall::NameInfo();  // in case the accessor is not reached
    int named = unw_get_proc_name(&cursor, buf, sizeof(buf), &offset);
    const auto& info = call.name_info;
    NativeFrame& f = w->Next();
    f.address = depth == 0 ? ip : ip - 1;
    bool stop = false;
    if ((named == 0 || named == -UNW_ENOMEM) && info.module_ok) {
      f.elf_address = info.vaddr;
      f.symbolized = FormatNativeFrameName(info.module.get(), p->paths[info.path], info.vaddr,
                                           options_.insert_dso_name, &f.name);
      stop = IsStopSymbol(buf);
    } else if (info.module_ok) {
      f.elf_address = info.vaddr;
      FormatNativeFrameName(nullptr, p->paths[info.path], info.vaddr, options_.insert_dso_name,
                            &f.name);
    } else if (info.mapped) {
      FormatUnreadableModuleFrameName(p->paths[info.path], options_.insert_dso_name, &f.name);
    } else {
      f.name.assign(kUnknownFrame);
    }
    call.name_info.module.reset();
    if (stop) {
      result.reached_stop = true;
      break;
    }
    if (w->size() >= options_.max_depth) {
      result.truncated = true;
      break;
    }
    ret = unw_step(&cursor);
    if (ret == 0) break;
    if (ret < 0) {
      AddMarker(w, &result, "unw_step", unw_strerror(ret));
      break;
    }
  }
  return result;
}

void NativeUnwinder::Impl::CacheEviction() {
  ++round_;
  names_.EndRound();
  modules_.EndRound();
  for (auto it = processes_.begin(); it != processes_.end();) {
    ProcessState& p = *it->second;
    bool drop = p.last_used_round + options_.process_max_age_rounds <= round_;
    if (!drop && !p.recorded) {
      // Exited, or the pid now names another process or program image.
      ProcessIdentity now;
      drop = ReadProcIdentity(p.pid, &proc_buffer_, &now) != 0 || now != p.identity;
    }
    if (drop) {
      it = processes_.erase(it);
      ++processes_dropped_;
    } else {
      ++it;
    }
  }
}

NativeUnwinderStats NativeUnwinder::Impl::Stats() const {
  NativeUnwinderStats s;
  s.names = names_.stats();
  s.modules = modules_.stats();
  s.module_mapped_bytes = modules_.mapped_bytes();
  s.processes = processes_.size();
  for (const auto& [pid, p] : processes_) {
    s.process_bytes +=
        kAddressSpaceBytes + sizeof(ProcessState) + p->maps.capacity() * sizeof(ExecMapping);
    for (const auto& path : p->paths) s.process_bytes += sizeof(path) + path.capacity();
  }
  s.processes_dropped = processes_dropped_;
  s.maps_reads = maps_reads_;
  s.unwinds = unwinds_;
  s.frames = frames_;
  s.errors = errors_;
  s.rounds = round_;
  s.remote_reads = remote_reads_;
  return s;
}

NativeUnwinder::NativeUnwinder(NativeUnwinderOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
NativeUnwinder::~NativeUnwinder() = default;

NativeUnwindResult NativeUnwinder::Unwind(const NativeSnapshot& snapshot,
                                          std::vector<NativeFrame>* out_leaf_first) {
  return impl_->Unwind(snapshot, out_leaf_first);
}
void NativeUnwinder::cache_eviction() { impl_->CacheEviction(); }
NativeUnwinderStats NativeUnwinder::stats() const { return impl_->Stats(); }
void NativeUnwinder::set_cache_enabled(bool enabled) { impl_->options_.cache_enabled = enabled; }
bool NativeUnwinder::cache_enabled() const { return impl_->options_.cache_enabled; }
void NativeUnwinder::ForgetProcess(pid_t pid) { impl_->ForgetProcess(pid); }
Status NativeUnwinder::AddRecordedProcess(pid_t pid, std::string maps_text, std::string root_dir) {
  return impl_->AddRecordedProcess(pid, std::move(maps_text), std::move(root_dir));
}
void NativeUnwinder::set_name_cache_limits(const CacheLimits& limits) {
  impl_->options_.name_cache_limits = limits;
  impl_->names_.set_limits(limits);
}
void NativeUnwinder::set_module_cache_limits(const CacheLimits& limits) {
  impl_->options_.module_cache_limits = limits;
  impl_->modules_.set_limits(limits);
}
const NativeUnwinderOptions& NativeUnwinder::options() const { return impl_->options_; }

}  // namespace pyperf
