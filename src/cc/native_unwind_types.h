// The values one native unwind takes and gives: a sample's registers and
// stack copy (NativeSnapshot), the frames named from it (NativeFrame, leaf
// first) and how the unwind ended (NativeUnwindResult). NativeUnwinder
// (native_unwinder.h) is the front; its helpers (cached_rule_walk.h,
// unwind_accessors.h, native_frame_writer.h) take and fill these without
// depending on it.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "file_id.h"

namespace ebpf {

struct NativeSnapshot {
  pid_t pid = 0;
  uint64_t ip = 0, sp = 0, bp = 0;
  // Copy of the target's stack: the bytes at [sp, sp + stack_len).
  const uint8_t* stack = nullptr;
  size_t stack_len = 0;
  // The copy also holds this many bytes below sp, before `stack` (x86-64's
  // red zone: a function's epilogue may have popped its frame while its
  // unwind rule still finds a saved register there, below the new sp).
  size_t stack_below_sp = 0;
  // Optional: a value that changes whenever `pid` names a different program
  // image (PyPerf: the task's mm_struct address, read by BPF). 0 = unknown.
  // When it differs from the last one seen for the pid, the per-process state
  // is dropped before unwinding. A caller that gives it must ForgetProcess a
  // pid that exits: cache_eviction then reads no /proc file for it.
  uint64_t process_key = 0;
  // The copy stopped at its size limit and the stack goes on beyond it (else
  // it holds the stack up to its end). With UnwindBounds::stack_copy_only, a
  // step that needs stack beyond a cut copy ends the unwind (copy_ended);
  // beyond a whole one, it is an unwind error.
  bool stack_cut = false;
  // Optional: an address inside the stack frame the unwind is to end with
  // (PyPerf: the entry shim of the innermost eval-loop call, a local of that
  // call's C frame, from 3.12 on). The frame whose own stack [sp, its
  // caller's sp) holds it is the last one, as if its symbol were in the stop
  // set, whether or not its code has a symbol (a function's cold part in a
  // stripped binary has none). 0 = none. Ignored with walk_past_stop_symbols.
  uint64_t stop_frame_anchor = 0;
};

// The 8 bytes at `addr` from the snapshot's stack copy (below sp too, within
// stack_below_sp); false if the copy does not hold them all.
inline bool ReadStackCopy(const NativeSnapshot& s, uint64_t addr, uint64_t* value) {
  if (!s.stack || s.sp < s.stack_below_sp) return false;
  const uint64_t first = s.sp - s.stack_below_sp;
  const uint64_t size = s.stack_below_sp + s.stack_len;
  if (addr < first || addr - first > size || size - (addr - first) < sizeof(*value)) return false;
  std::memcpy(value, s.stack - s.stack_below_sp + (addr - first), sizeof(*value));
  return true;
}

struct NativeFrame {
  std::string name;  // the name; for a marker frame, what failed
  // The address named: the ip for the leaf, ip-1 (inside the call) for callers.
  uint64_t address = 0;
  // The same address in the ELF file's own terms (what addr2line takes), 0 if
  // no module was found.
  uint64_t elf_address = 0;
  bool symbolized = false;  // name is a symbol containing the address
  bool error = false;       // a marker frame, not a real frame
  // The mapped file the address is in (zero when unknown, e.g. anonymous
  // memory, or not looked up: the uncached path). See DescribeFile.
  FileId file;
  // The frame's stack pointer: the sample's sp for the leaf, the CFA of the
  // frame it called for a caller. The frame's own stack is [sp, the next
  // (calling) frame's sp).
  uint64_t sp = 0;
  // The symbol is in the unwinder's stop set (the walk went on past it:
  // NativeUnwinderOptions::walk_past_stop_symbols).
  bool stop_symbol = false;
};

// How far one unwind goes: the part of NativeUnwinderOptions both walks
// (cached_rule_walk.h and libunwind's) obey alike.
struct UnwindBounds {
  size_t max_depth = 128;
  // Stop-set frames are marked (NativeFrame::stop_symbol) and the walk goes
  // on, instead of ending with them.
  bool walk_past_stop_symbols = false;
  // Stack memory beyond the snapshot's copy is never read from the live
  // process: a step that needs it ends the unwind (copy_ended).
  bool stack_copy_only = false;
};

struct NativeUnwindResult {
  bool error = false;  // a marker frame was added
  // The last frame is in the stop set, or holds the snapshot's
  // stop_frame_anchor.
  bool reached_stop = false;
  bool truncated = false;  // max_depth frames were produced first
  // The next step needed the stack beyond the snapshot's copy, which was cut
  // (NativeSnapshot::stack_cut) and is not to be read live
  // (UnwindBounds::stack_copy_only): the frames are exact, and the stack's
  // outer part is not among them.
  bool copy_ended = false;
  bool ok() const { return !error; }
};

}  // namespace ebpf
