// libunwind's accessors over a native snapshot; see unwind_accessors.h.
#include "unwind_accessors.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string_view>

// Exported by libunwind-x86_64 (1.6.2) but not declared in its public headers:
// the remote binary search over an .eh_frame_hdr table described by an
// unw_dyn_info_t. Linux perf declares and uses it the same way.
extern "C" int _Ux86_64_dwarf_search_unwind_table(unw_addr_space_t as, unw_word_t ip,
                                                  unw_dyn_info_t* di, unw_proc_info_t* pi,
                                                  int need_unwind_info, void* arg);

namespace ebpf {
namespace {

int FindProcInfo(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t* pi, int need_unwind_info,
                 void* arg) {
  auto* call = static_cast<UnwindCall*>(arg);
  const ExecMapping* found = call->strategy->FindMapping(ip);
  if (!found || found->kind == ExecMapping::kAnonymous) return -UNW_ENOINFO;
  const ExecMapping m = *found;  // a refresh inside ModuleFor may move it
  std::shared_ptr<const NativeModule> module = call->strategy->ModuleFor(m, false);
  if (!module) return -UNW_ENOINFO;
  std::optional<uint64_t> vaddr = module->FileOffsetToVaddr(ip - m.start + m.pgoff);
  if (!vaddr) return -UNW_ENOINFO;
  const uint64_t bias = ip - *vaddr;
  unw_dyn_info_t di;
  if (!DescribeUnwindTable(*module, bias, *vaddr, &di)) return -UNW_ENOINFO;
  // One entry per load bias (per mapped module), its module the latest.
  auto& known = call->process->unwind_modules;
  auto same =
      std::find_if(known.begin(), known.end(), [&](const auto& k) { return k.bias == bias; });
  if (same == known.end()) {
    known.push_back({module, bias});
  } else if (same->module != module) {
    same->module = module;
  }
  call->Serve(module, bias);
  return SearchUnwindTable(as, ip, &di, pi, need_unwind_info, arg);
}

// Addresses this near the sampled sp are taken for the thread's stack.
constexpr uint64_t kNearStackBelow = 4096, kNearStackAbove = uint64_t{1} << 20;

// The bytes at `addr` from the read-only image of a module whose unwind
// table this address space was given before (ProcessUnwindState::
// unwind_modules).
bool ReadUnwindModuleImage(UnwindCall* call, uint64_t addr, unw_word_t* val) {
  const NativeSnapshot& s = *call->snapshot;
  // The thread's stack beyond its copy (leaf mode reads it live) is no module.
  if (addr + kNearStackBelow >= s.sp && addr - s.sp < s.stack_len + kNearStackAbove) return false;
  for (const auto& known : call->process->unwind_modules) {
    const uint8_t* p = known.module->image().BytesAtVaddr(addr - known.bias, sizeof(*val), false);
    if (!p) continue;
    memcpy(val, p, sizeof(*val));
    return true;
  }
  return false;
}

int AccessMem(unw_addr_space_t, unw_word_t addr, unw_word_t* val, int write, void* arg) {
  if (write) return -UNW_EINVAL;
  auto* call = static_cast<UnwindCall*>(arg);
  const NativeSnapshot& s = *call->snapshot;
  if (ReadStackCopy(s, addr, val)) return 0;
  for (const auto& served : call->served) {
    if (!served.module) continue;
    if (const uint8_t* p = served.module->image().BytesAtVaddr(addr - served.bias, sizeof(*val),
                                                               call->file_image_is_memory)) {
      memcpy(val, p, sizeof(*val));
      return 0;
    }
  }
  if (ReadUnwindModuleImage(call, addr, val)) return 0;
  if (call->stack_copy_only) {
    // The stack is read only from the copy. A module's own writable data (a
    // GOT entry libunwind reads for an FDE's personality routine: glibc's
    // qsort_r has one) is not the stack, and is read from the process.
    bool module_data = false;
    for (const auto& served : call->served) {
      if (served.module &&
          served.module->image().BytesAtVaddr(addr - served.bias, sizeof(*val), true)) {
        module_data = true;
      }
    }
    if (!module_data) {
      if (s.stack_cut && addr >= s.sp) call->copy_ended = true;
      return -UNW_EINVAL;
    }
  }
  ++*call->remote_reads;
  return call->process->target->ReadMemory(addr, val, sizeof(*val)) ? 0 : -UNW_EINVAL;
}

int AccessReg(unw_addr_space_t, unw_regnum_t reg, unw_word_t* val, int write, void* arg) {
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

int GetProcName(unw_addr_space_t, unw_word_t addr, char* buf, size_t len, unw_word_t* offset,
                void* arg) {
  auto* call = static_cast<UnwindCall*>(arg);
  auto& info = call->name_info;
  info = UnwindCall::NameInfo();
  const ExecMapping* found = call->strategy->FindMapping(addr);
  if (!found || found->kind == ExecMapping::kAnonymous) return -UNW_ENOINFO;
  const ExecMapping m = *found;
  info.mapped = true;
  info.path = m.path;
  info.module = call->strategy->ModuleFor(m, true);
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

// DWARF unwind info is freed by libunwind itself; nothing of ours to release.
void PutUnwindInfo(unw_addr_space_t, unw_proc_info_t*, void*) {}

// No dynamically registered unwind info (JIT registration) is read.
int GetDynInfoListAddr(unw_addr_space_t, unw_word_t*, void*) { return -UNW_ENOINFO; }

int AccessFpreg(unw_addr_space_t, unw_regnum_t, unw_fpreg_t*, int, void*) { return -UNW_EINVAL; }

int Resume(unw_addr_space_t, unw_cursor_t*, void*) { return -UNW_EINVAL; }

}  // namespace

void UnwindCall::Serve(std::shared_ptr<const NativeModule> module, uint64_t bias) {
  for (auto& s : served) {
    if (s.module == module && s.bias == bias) return;
  }
  served[served_next] = Served{std::move(module), bias};
  served_next = (served_next + 1) % served.size();
}

unw_accessors_t ReadOnlyRemoteAccessors(decltype(unw_accessors_t::find_proc_info) find_proc_info,
                                        decltype(unw_accessors_t::access_mem) access_mem,
                                        decltype(unw_accessors_t::access_reg) access_reg,
                                        decltype(unw_accessors_t::get_proc_name) get_proc_name) {
  unw_accessors_t a{};
  a.find_proc_info = find_proc_info;
  a.put_unwind_info = &PutUnwindInfo;
  a.get_dyn_info_list_addr = &GetDynInfoListAddr;
  a.access_mem = access_mem;
  a.access_reg = access_reg;
  a.access_fpreg = &AccessFpreg;
  a.resume = &Resume;
  a.get_proc_name = get_proc_name;
  return a;
}

unw_accessors_t* NativeUnwindAccessors() {
  static unw_accessors_t accessors =
      ReadOnlyRemoteAccessors(&FindProcInfo, &AccessMem, &AccessReg, &GetProcName);
  return &accessors;
}

bool DescribeUnwindTable(const NativeModule& module, uint64_t bias, uint64_t vaddr,
                         unw_dyn_info_t* di) {
  const UnwindTableLocation& table = module.unwind_table();
  const ElfLoadSegment* text = module.image().SegmentForVaddr(vaddr);
  if (!table.usable || !text) return false;
  memset(di, 0, sizeof(*di));
  di->format = UNW_INFO_FORMAT_REMOTE_TABLE;
  di->start_ip = bias + text->vaddr;
  di->end_ip = di->start_ip + text->memsz;
  di->u.rti.segbase = bias + table.eh_frame_hdr_vaddr;
  di->u.rti.table_data = bias + table.table_vaddr;
  // (int32 start, int32 fde) pairs, counted in words as libunwind expects.
  di->u.rti.table_len = table.fde_count * 8 / sizeof(unw_word_t);
  return true;
}

int SearchUnwindTable(unw_addr_space_t as, unw_word_t ip, unw_dyn_info_t* di, unw_proc_info_t* pi,
                      int need_unwind_info, void* arg) {
  return _Ux86_64_dwarf_search_unwind_table(as, ip, di, pi, need_unwind_info, arg);
}

}  // namespace ebpf
