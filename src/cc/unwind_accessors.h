// libunwind's remote accessors for one sample's native snapshot, and the
// per-unwind context they receive as their `arg`:
//  - access_mem reads the stack copy first; bytes of a mapped file's segments
//    libunwind is reading unwind tables from (.eh_frame_hdr, .eh_frame) come
//    from the module's file image; anything else from the target process
//    (TargetProcess::ReadMemory). Writes are refused.
//  - access_reg serves ip/sp/bp from the snapshot; access_fpreg, resume and
//    register writes refuse (-UNW_EINVAL).
//  - find_proc_info hands libunwind the .eh_frame_hdr table of the module
//    holding the ip and lets _Ux86_64_dwarf_search_unwind_table search it.
//  - get_proc_name names an address from its module's symbols (only the
//    from-scratch strategy asks for it).
// Where the mapping and module behind an address come from is the unwind's
// UnwindStrategy: the shared caches, or everything from scratch.
#pragma once

#include <libunwind.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "native_module.h"
#include "native_unwind_types.h"
#include "process_unwind_state.h"

namespace ebpf {

struct UnwindCall;

// How one unwind resolves what it meets: the mapping and module behind an
// address (for libunwind's unwind tables), and the name of each frame.
class UnwindStrategy {
 public:
  virtual ~UnwindStrategy() = default;
  // The executable mapping holding addr, or nullptr (may re-read the mappings).
  virtual const ExecMapping* FindMapping(uint64_t addr) = 0;
  // The module behind a file or vDSO mapping, or null when it cannot be read.
  // need_symbols is false when only the unwind table is wanted.
  virtual std::shared_ptr<const NativeModule> ModuleFor(const ExecMapping& m,
                                                        bool need_symbols) = 0;
  // Names the frame at `addr`, the cursor's current frame, into *frame (whose
  // address is set); returns whether its symbol is in the stop set.
  virtual bool NameFrame(UnwindCall* call, unw_cursor_t* cursor, uint64_t addr,
                         NativeFrame* frame) = 0;
};

// Per-unwind state handed to the accessors as their `arg`.
struct UnwindCall {
  const NativeSnapshot* snapshot = nullptr;
  ProcessUnwindState* process = nullptr;
  UnwindStrategy* strategy = nullptr;
  uint64_t* remote_reads = nullptr;  // counts TargetProcess::ReadMemory calls
  // process->target->file_image_is_memory(), asked once per unwind rather
  // than on every memory read.
  bool file_image_is_memory = false;
  // UnwindBounds::stack_copy_only: no live reads but of a served module's
  // writable data; a refused read at or above sp of a cut copy
  // (NativeSnapshot::stack_cut) sets copy_ended.
  bool stack_copy_only = false;
  bool copy_ended = false;

  // Modules libunwind is reading unwind tables from: their bytes are served
  // from the file image instead of the target's memory.
  struct Served {
    std::shared_ptr<const NativeModule> module;
    uint64_t bias = 0;
  };
  std::array<Served, 4> served;
  size_t served_next = 0;
  void Serve(std::shared_ptr<const NativeModule> module, uint64_t bias);

  // Filled by get_proc_name for the frame being named.
  struct NameInfo {
    bool mapped = false;     // the address is in a file or vDSO mapping
    bool module_ok = false;  // ... whose module was read: vaddr is set
    uint64_t vaddr = 0;
    uint32_t path = 0;
    std::shared_ptr<const NativeModule> module;
  } name_info;
};

// The accessors, for unw_create_addr_space.
unw_accessors_t* NativeUnwindAccessors();

// Accessors for a read-only remote unwind from a register snapshot: the four
// given, with the rest refusing what such an unwind never does (no dynamic
// unwind info, no floating-point registers, no resuming) and put_unwind_info
// releasing nothing, since libunwind frees its DWARF info itself.
// NativeUnwindAccessors is built with it, and so is any other unwind over
// libunwind that must behave the same (test_eh_frame_reader's oracle).
unw_accessors_t ReadOnlyRemoteAccessors(decltype(unw_accessors_t::find_proc_info) find_proc_info,
                                        decltype(unw_accessors_t::access_mem) access_mem,
                                        decltype(unw_accessors_t::access_reg) access_reg,
                                        decltype(unw_accessors_t::get_proc_name) get_proc_name);

// Describes `module`'s .eh_frame_hdr table, the module loaded at `bias` (an
// address in the process minus the same address in the file's own terms), as
// libunwind's remote binary search takes it. False when the module has no
// usable table or no segment holds `vaddr` (a file address).
bool DescribeUnwindTable(const NativeModule& module, uint64_t bias, uint64_t vaddr,
                         unw_dyn_info_t* di);
// libunwind's search of such a table for `ip` (find_proc_info's work).
int SearchUnwindTable(unw_addr_space_t as, unw_word_t ip, unw_dyn_info_t* di, unw_proc_info_t* pi,
                      int need_unwind_info, void* arg);

}  // namespace ebpf
