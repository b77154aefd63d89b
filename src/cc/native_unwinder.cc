// NativeUnwinder: see native_unwinder.h. The per-process state lives in
// process_unwind_state.h, what is read of a process in target_process.h and
// libunwind's accessors in unwind_accessors.h, the fast path that needs no
// libunwind in cached_rule_walk.h; this file holds the processes and caches,
// and the one unwind loop with its two strategies.
#include "native_unwinder.h"

#include <libunwind.h>

#include <string_view>
#include <unordered_map>

#include "cached_rule_walk.h"
#include "eh_frame_reader.h"
#include "elf_image_cache.h"
#include "native_frame_name.h"
#include "native_frame_writer.h"
#include "native_module.h"
#include "native_module_cache.h"
#include "proc_name_cache.h"
#include "process_unwind_state.h"
#include "stop_symbols.h"
#include "target_process.h"
#include "unwind_accessors.h"

namespace ebpf {

namespace {

constexpr std::string_view kUnknownFrame = "[unknown]";

}  // namespace

class NativeUnwinder::Impl {
 public:
  explicit Impl(NativeUnwinderOptions options)
      : options_(std::move(options)),
        names_(options_.name_cache_limits),
        modules_(options_.module_cache_limits),
        stop_symbols_(options_.stop_symbols) {}

  NativeUnwindResult Unwind(const NativeSnapshot& snapshot, std::vector<NativeFrame>* out);
  void CacheEviction();
  NativeUnwinderStats Stats() const;
  void ForgetProcess(pid_t pid) {
    if (processes_.erase(pid)) ++counts_.processes_dropped;
    recordings_.erase(pid);
  }
  Status AddRecordedProcess(pid_t pid, std::string maps_text, std::string root_dir) {
    if (pid <= 0) return Status::Error("a recorded process needs a pid > 0");
    ForgetProcess(pid);
    recordings_[pid] =
        std::make_shared<RecordedProcess>(pid, std::move(maps_text), std::move(root_dir));
    return Status::Ok();
  }

  NativeUnwinderOptions options_;
  ProcNameCache names_;
  NativeModuleCache modules_;

 private:
  class CachedStrategy;
  class FromScratchStrategy;

  NativeUnwindResult UnwindCached(const NativeSnapshot& s, FrameWriter* w);
  NativeUnwindResult UnwindFromScratch(const NativeSnapshot& s, FrameWriter* w);
  // The one unwind loop; the strategy decides where modules and names come from.
  NativeUnwindResult Walk(const NativeSnapshot& s, ProcessUnwindState* p, unw_addr_space_t as,
                          UnwindStrategy* strategy, FrameWriter* w);

  // --- processes ---
  // Builds a process's state from scratch (the caller owns it): a recording
  // registered for the pid, else the live process.
  Result<std::unique_ptr<ProcessUnwindState>> NewProcess(pid_t pid) {
    ++counts_.maps_reads;
    auto recording = recordings_.find(pid);
    if (recording != recordings_.end()) {
      return ProcessUnwindState::Create(recording->second, &maps_buffer_);
    }
    auto live = LiveProcess::Attach(pid);
    if (!live.ok()) return live.status();
    return ProcessUnwindState::Create(std::move(live).value(), &maps_buffer_);
  }

  // Drops cached modules whose device+inode now names a different file (an
  // inode reused after an upgrade), and retries files that failed to load.
  // A recording's files do not change.
  void VerifyModules(ProcessUnwindState& p) {
    if (!p.target->can_change()) return;
    for (const ExecMapping& m : p.maps) {
      if (m.kind != ExecMapping::kFile) continue;
      const CachedModule* cached = modules_.Peek(m.file);
      if (!cached) continue;
      if (!cached->module) {
        modules_.Erase(m.file);
        continue;
      }
      auto now = p.target->MappedFileStamp(m.start, m.end);
      if (!now) continue;  // cannot tell; keep
      if (now->size != cached->module->file_size() ||
          now->mtime_ns != cached->module->file_mtime_ns()) {
        modules_.Erase(m.file);
        names_.EraseFile(m.file);
      }
    }
  }

  // The registered state for the snapshot's process, created on first sight
  // and replaced when BPF says the pid runs another program image.
  ProcessUnwindState* GetProcess(const NativeSnapshot& s, std::string* error) {
    auto it = processes_.find(s.pid);
    if (it != processes_.end()) {
      ProcessUnwindState& p = *it->second;
      if (s.process_key != 0 && p.process_key != 0 && s.process_key != p.process_key) {
        processes_.erase(it);  // a new program image under the same pid
        ++counts_.processes_dropped;
      } else {
        if (p.process_key == 0) p.process_key = s.process_key;
        p.last_used_round = round();
        return &p;
      }
    }
    auto created = NewProcess(s.pid);
    if (!created.ok()) {
      *error = created.error();
      return nullptr;
    }
    std::unique_ptr<ProcessUnwindState> p = std::move(created).value();
    p->process_key = s.process_key;
    p->last_used_round = round();
    p->address_space.reset(unw_create_addr_space(NativeUnwindAccessors(), 0));
    if (!p->address_space) {
      *error = "unw_create_addr_space failed";
      return nullptr;
    }
    // Per address space, so cached register states never cross processes.
    unw_set_caching_policy(p->address_space.get(), UNW_CACHE_GLOBAL);
    VerifyModules(*p);
    ProcessUnwindState* raw = p.get();
    processes_[s.pid] = std::move(p);
    return raw;
  }

  static constexpr uint32_t kMaxRefreshesPerRound = 4;
  bool MayRefresh(ProcessUnwindState* p) {
    if (!p->target->can_change()) return false;
    if (p->refresh_round != round()) {
      p->refresh_round = round();
      p->refreshes_this_round = 0;
    }
    return p->refreshes_this_round < kMaxRefreshesPerRound;
  }

  // Re-reads a process's mappings (a few times per round at most), noticing
  // a pid reuse or an exec on the way.
  TargetProcess::Identity RefreshProcess(ProcessUnwindState* p) {
    ++p->refreshes_this_round;
    TargetProcess::Identity identity = p->target->CheckIdentity();
    if (identity != TargetProcess::Identity::kSame) return identity;
    ++counts_.maps_reads;
    if (!p->LoadMappings(&maps_buffer_).ok()) return TargetProcess::Identity::kGone;
    VerifyModules(*p);
    p->flush_unwind_cache = true;
    return identity;
  }

  StopSymbols stop_symbols_;
  std::unordered_map<pid_t, std::unique_ptr<ProcessUnwindState>> processes_;
  std::unordered_map<pid_t, std::shared_ptr<RecordedProcess>> recordings_;
  std::string maps_buffer_;
  std::vector<std::string> spare_names_;
  CachedName unknown_name_{std::string(kUnknownFrame), 0, false, false};
  // The counters of stats(); the rest of it is filled when asked.
  NativeUnwinderStats counts_;
  uint64_t round() const { return counts_.rounds; }
  UnwindBounds bounds() const {
    return {options_.max_depth, options_.walk_past_stop_symbols, options_.stack_copy_only};
  }

  friend class NativeUnwinder;
};

// Steady state: mappings re-read only when an address is outside all of them
// (a few times per round), modules and names from the shared caches.
class NativeUnwinder::Impl::CachedStrategy final : public UnwindStrategy {
 public:
  CachedStrategy(Impl* impl, ProcessUnwindState* process) : impl_(impl), process_(process) {}

  const ExecMapping* FindMapping(uint64_t addr) override {
    if (const ExecMapping* m = process_->Find(addr)) return m;
    if (!impl_->MayRefresh(process_)) return nullptr;
    if (impl_->RefreshProcess(process_) != TargetProcess::Identity::kSame) return nullptr;
    return process_->Find(addr);
  }

  std::shared_ptr<const NativeModule> ModuleFor(const ExecMapping& m, bool) override {
    if (const CachedModule* c = impl_->modules_.Lookup(m.file)) return c->module;
    auto loaded = process_->LoadModule(m, true);
    CachedModule entry;
    entry.path = process_->path(m);
    if (loaded.ok()) {
      entry.module = std::shared_ptr<const NativeModule>(std::move(loaded).value());
    } else {
      entry.error = loaded.error();
    }
    return impl_->modules_.Insert(m.file, std::move(entry))->module;
  }

  bool NameFrame(UnwindCall*, unw_cursor_t*, uint64_t addr, NativeFrame* f) override {
    const CachedName* name = Resolve(addr, &f->file);
    f->name.assign(name->text);
    f->elf_address = name->elf_vaddr;
    f->symbolized = name->symbolized;
    return name->is_stop;
  }

 private:
  const CachedName* Resolve(uint64_t addr, FileId* file) {
    *file = FileId{};
    const ExecMapping* m = FindMapping(addr);
    if (!m || m->kind == ExecMapping::kAnonymous) return &impl_->unknown_name_;
    *file = m->file;
    NameKey key{m->file, addr - m->start + m->pgoff};
    if (const CachedName* hit = impl_->names_.Lookup(key)) return hit;
    const ExecMapping mapping = *m;  // a refresh inside ModuleFor may move it
    std::shared_ptr<const NativeModule> module = ModuleFor(mapping, true);
    CachedName entry;
    MakeName(module.get(), process_->path(mapping), key.offset, &entry);
    return impl_->names_.Insert(key, std::move(entry));
  }

  void MakeName(const NativeModule* module, const std::string& path, uint64_t file_offset,
                CachedName* out) {
    const bool dso = impl_->options_.insert_dso_name;
    std::optional<uint64_t> vaddr;
    if (module) vaddr = module->FileOffsetToVaddr(file_offset);
    if (!vaddr) {
      FormatUnreadableModuleFrameName(path, dso, &out->text);
      return;
    }
    out->elf_vaddr = *vaddr;
    // The rule at the same address libunwind looks its FDE up by (the leaf's
    // ip, a caller's ip-1), read from the same file.
    out->rule = EhFrameReader(*module).RuleFor(*vaddr);
    out->symbolized = FormatNativeFrameName(module, path, *vaddr, dso, &out->text);
    if (out->symbolized) {
      out->is_stop = impl_->stop_symbols_.Contains(module->SymbolName(*module->FindSymbol(*vaddr)));
    }
  }

  Impl* impl_;
  ProcessUnwindState* process_;
};

// Every frame resolved from scratch, as PyPerf did per sample before these
// caches: each module opened and parsed again for the unwind table and again
// for the name, names through unw_get_proc_name. Kept to measure the caches
// against; frames are the same either way.
class NativeUnwinder::Impl::FromScratchStrategy final : public UnwindStrategy {
 public:
  FromScratchStrategy(Impl* impl, ProcessUnwindState* process) : impl_(impl), process_(process) {}

  const ExecMapping* FindMapping(uint64_t addr) override { return process_->Find(addr); }

  std::shared_ptr<const NativeModule> ModuleFor(const ExecMapping& m, bool need_symbols) override {
    auto loaded = process_->LoadModule(m, need_symbols, /*from_scratch=*/true);
    if (!loaded.ok()) return nullptr;
    return std::shared_ptr<const NativeModule>(std::move(loaded).value());
  }

  bool NameFrame(UnwindCall* call, unw_cursor_t* cursor, uint64_t, NativeFrame* f) override {
    const bool dso = impl_->options_.insert_dso_name;
    char buf[1024];
    unw_word_t offset = 0;
    call->name_info = UnwindCall::NameInfo();  // in case the accessor is not reached
    int named = unw_get_proc_name(cursor, buf, sizeof(buf), &offset);
    const auto& info = call->name_info;
    bool stop = false;
    if ((named == 0 || named == -UNW_ENOMEM) && info.module_ok) {
      f->elf_address = info.vaddr;
      f->symbolized = FormatNativeFrameName(info.module.get(), process_->paths[info.path],
                                            info.vaddr, dso, &f->name);
      stop = impl_->stop_symbols_.Contains(buf);
    } else if (info.module_ok) {
      f->elf_address = info.vaddr;
      FormatNativeFrameName(nullptr, process_->paths[info.path], info.vaddr, dso, &f->name);
    } else if (info.mapped) {
      FormatUnreadableModuleFrameName(process_->paths[info.path], dso, &f->name);
    } else {
      f->name.assign(kUnknownFrame);
    }
    call->name_info.module.reset();
    return stop;
  }

 private:
  Impl* impl_;
  ProcessUnwindState* process_;
};

NativeUnwindResult NativeUnwinder::Impl::Unwind(const NativeSnapshot& snapshot,
                                                std::vector<NativeFrame>* out) {
  ++counts_.unwinds;
  FrameWriter w(out, &spare_names_);
  NativeUnwindResult result;
  NativeSnapshot s = snapshot;
  if (!s.stack) s.stack_len = 0;
  if (s.ip == 0 || s.sp == 0 || s.pid <= 0) {
    w.AddMarker(&result, "no registers", "");
  } else if (options_.stack_copy_only && s.stack_len == 0 && s.stack_below_sp == 0 &&
             !s.stack_cut) {
    // The copy is the only stack there is, and it is empty: the page at sp
    // was not present when the sample was taken (a page fault on it, the
    // stack growing into a new page, is where such samples come from).
    w.AddMarker(&result, "no stack copy", "the page at sp was not present");
  } else if (options_.cache_enabled) {
    result = UnwindCached(s, &w);
  } else {
    result = UnwindFromScratch(s, &w);
  }
  w.Finish();
  counts_.frames += out->size();
  if (result.error) ++counts_.errors;
  return result;
}

NativeUnwindResult NativeUnwinder::Impl::UnwindCached(const NativeSnapshot& s, FrameWriter* w) {
  NativeUnwindResult result;
  std::string error;
  ProcessUnwindState* p = GetProcess(s, &error);
  // An ip outside every known mapping: new code was mapped, or the pid is
  // now another process. Check before libunwind holds any state.
  if (p && !p->Find(s.ip) && MayRefresh(p) &&
      RefreshProcess(p) == TargetProcess::Identity::kReplaced) {
    processes_.erase(s.pid);
    ++counts_.processes_dropped;
    p = GetProcess(s, &error);
  }
  if (!p) {
    w->AddMarker(&result, "reading process mappings", error);
    return result;
  }
  if (p->flush_unwind_cache) {
    unw_flush_cache(p->address_space.get(), 0, 0);
    // No cached register state points into a module any more (and the
    // mappings may have changed under the old ones).
    p->unwind_modules.clear();
    p->flush_unwind_cache = false;
  }
  // A stack whose every frame is cached: no libunwind at all.
  if (WalkWithCachedRules(s, p, &names_, bounds(), w, &result)) {
    ++counts_.fast_unwinds;
    return result;
  }
  ++counts_.fast_unwinds_abandoned;
  names_.UncountHits(w->size());  // the libunwind walk looks them up again
  w->Rewind();
  result = NativeUnwindResult();
  CachedStrategy strategy(this, p);
  return Walk(s, p, p->address_space.get(), &strategy, w);
}

NativeUnwindResult NativeUnwinder::Impl::UnwindFromScratch(const NativeSnapshot& s,
                                                           FrameWriter* w) {
  NativeUnwindResult result;
  auto created = NewProcess(s.pid);
  if (!created.ok()) {
    w->AddMarker(&result, "reading process mappings", created.error());
    return result;
  }
  std::unique_ptr<ProcessUnwindState> p = std::move(created).value();
  AddrSpace as(unw_create_addr_space(NativeUnwindAccessors(), 0));
  if (!as) {
    w->AddMarker(&result, "unw_create_addr_space", "out of memory");
    return result;
  }
  unw_set_caching_policy(as.get(), UNW_CACHE_NONE);
  FromScratchStrategy strategy(this, p.get());
  return Walk(s, p.get(), as.get(), &strategy, w);
}

NativeUnwindResult NativeUnwinder::Impl::Walk(const NativeSnapshot& s, ProcessUnwindState* p,
                                              unw_addr_space_t as, UnwindStrategy* strategy,
                                              FrameWriter* w) {
  NativeUnwindResult result;
  UnwindCall call;
  call.snapshot = &s;
  call.process = p;
  call.strategy = strategy;
  call.remote_reads = &counts_.remote_reads;
  call.file_image_is_memory = p->target->file_image_is_memory();
  call.stack_copy_only = options_.stack_copy_only;
  unw_cursor_t cursor;
  int ret = unw_init_remote(&cursor, as, &call);
  if (ret < 0) {
    w->AddMarker(&result, "unw_init_remote", unw_strerror(ret));
    return result;
  }
  for (size_t depth = 0;; ++depth) {
    unw_word_t ip = 0;
    ret = unw_get_reg(&cursor, UNW_REG_IP, &ip);
    if (ret < 0) {
      w->AddMarker(&result, "unw_get_reg", unw_strerror(ret));
      break;
    }
    if (ip == 0) break;
    unw_word_t sp = 0;
    unw_get_reg(&cursor, UNW_REG_SP, &sp);
    NativeFrame& f = w->Next();
    // A return address is just past the call; ip-1 is inside the caller
    // (and inside the function even when the call was its last instruction).
    f.address = depth == 0 ? ip : ip - 1;
    f.sp = sp;
    f.stop_symbol = strategy->NameFrame(&call, &cursor, f.address, &f);
    if (f.stop_symbol && !options_.walk_past_stop_symbols) {
      result.reached_stop = true;
      break;
    }
    if (w->size() >= options_.max_depth) {
      result.truncated = true;
      break;
    }
    ret = unw_step(&cursor);
    // The frame that holds the anchor ends the unwind (never the outermost).
    if (ret > 0 && !options_.walk_past_stop_symbols && s.stop_frame_anchor != 0) {
      unw_word_t caller_sp = 0;
      unw_get_reg(&cursor, UNW_REG_SP, &caller_sp);
      if (HoldsAnchor(s, f.sp, caller_sp, false)) {
        result.reached_stop = true;
        break;
      }
    }
    if (ret == 0) break;  // the outermost frame
    if (ret < 0 && call.copy_ended) {
      result.copy_ended = true;
      break;
    }
    if (ret < 0) {
      w->AddMarker(&result, "unw_step", unw_strerror(ret));
      break;
    }
  }
  return result;
}

void NativeUnwinder::Impl::CacheEviction() {
  ++counts_.rounds;  // a new round begins
  names_.EndRound();
  modules_.EndRound();
  ElfImageCache::Shared().EndRound();
  for (auto it = processes_.begin(); it != processes_.end();) {
    ProcessUnwindState& p = *it->second;
    // Unused for too long, exited, or the pid now names another process or
    // program image. A process whose snapshots carry a process_key tells of an
    // exec with each sample, and its caller forgets it when it exits: /proc is
    // read only for the others.
    bool drop = p.last_used_round + options_.process_max_age_rounds <= round() ||
                (p.process_key == 0 && p.target->CheckIdentity() != TargetProcess::Identity::kSame);
    if (drop) {
      it = processes_.erase(it);
      ++counts_.processes_dropped;
    } else {
      ++it;
    }
  }
}

NativeUnwinderStats NativeUnwinder::Impl::Stats() const {
  NativeUnwinderStats s = counts_;
  s.names = names_.stats();
  s.modules = modules_.stats();
  s.module_mapped_bytes = modules_.mapped_bytes();
  s.processes = processes_.size();
  for (const auto& [pid, p] : processes_) s.process_bytes += p->memory_bytes();
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

bool NativeUnwinder::DescribeFile(const FileId& file, std::string* path,
                                  std::string* build_id) const {
  const CachedModule* cached = impl_->modules_.Peek(file);
  if (cached == nullptr) return false;
  *path = cached->path;
  *build_id = cached->module ? cached->module->build_id() : std::string();
  return true;
}
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

}  // namespace ebpf
