// The unwinder's fast path; see cached_rule_walk.h. Each step mirrors what
// libunwind 1.6 does for a DWARF row on x86-64 (dwarf/Gparser.c
// apply_reg_state, x86_64/Gstep.c), restricted to the rules FrameRule holds.
#include "cached_rule_walk.h"

#include <cstdint>
#include <cstring>

namespace ebpf {

namespace {

// Whether a read of 8 bytes at addr failed only because the copy ends below
// them (not a CFA below sp, which libunwind judges).
bool BeyondCopy(const NativeSnapshot& s, uint64_t addr) {
  return addr >= s.sp && (addr - s.sp >= s.stack_len || s.stack_len - (addr - s.sp) < 8);
}

}  // namespace

bool HoldsAnchor(const NativeSnapshot& s, uint64_t frame_sp, uint64_t caller_sp, bool outermost) {
  const uint64_t anchor = s.stop_frame_anchor;
  // A thread's outermost frame (_start, clone3) is never an eval-loop call,
  // and its open-ended stack would take in an anchor off this stack.
  if (anchor == 0 || outermost) return false;
  return anchor >= frame_sp && anchor < caller_sp;
}

bool WalkWithCachedRules(const NativeSnapshot& s, ProcessUnwindState* process, ProcNameCache* names,
                         const UnwindBounds& bounds, FrameWriter* w, NativeUnwindResult* result) {
  // A read the stack copy cannot serve: with stack_copy_only, the unwind's
  // end (what libunwind's accessors make of it too); else libunwind's to try.
  auto unreadable = [&](uint64_t addr) {
    if (!bounds.stack_copy_only || !s.stack_cut || !BeyondCopy(s, addr)) return false;
    result->copy_ended = true;
    return true;
  };
  // libunwind's cursor: the CFA doubles as RSP, and RBP is either a value or
  // the stack slot it was saved in (read only when a CFA needs it).
  uint64_t ip = s.ip, cfa = s.sp;
  uint64_t rbp = s.bp, rbp_slot = 0;
  bool rbp_read = true;
  for (size_t depth = 0;; ++depth) {
    if (ip == 0) return true;
    // A return address is just past the call; ip-1 is inside the caller.
    const uint64_t addr = depth == 0 ? ip : ip - 1;
    const ExecMapping* m = process->Find(addr);
    if (!m || m->kind == ExecMapping::kAnonymous) return false;
    const CachedName* name = names->Probe(NameKey{m->file, addr - m->start + m->pgoff});
    if (!name) return false;
    NativeFrame& f = w->Next();
    f.address = addr;
    f.name.assign(name->text);
    f.elf_address = name->elf_vaddr;
    f.symbolized = name->symbolized;
    f.file = m->file;
    f.sp = cfa;
    f.stop_symbol = name->is_stop;
    if (name->is_stop && !bounds.walk_past_stop_symbols) {
      result->reached_stop = true;
      return true;
    }
    if (w->size() >= bounds.max_depth) {
      result->truncated = true;
      return true;
    }

    const FrameRule& rule = name->rule;
    if (!rule.simple) return false;
    uint64_t base = cfa;
    if (rule.cfa_base == FrameRule::CfaBase::kRbp) {
      if (!rbp_read && !ReadStackCopy(s, rbp_slot, &rbp)) return unreadable(rbp_slot);
      rbp_read = true;
      base = rbp;
    }
    const uint64_t next_cfa = base + static_cast<uint64_t>(static_cast<int64_t>(rule.cfa_offset));
    uint64_t next_ip = 0;  // an undefined return address: the outermost frame
    const uint64_t ra_slot = next_cfa + static_cast<uint64_t>(int64_t{rule.return_address_offset});
    if (rule.return_address == FrameRule::Saved::kAtCfa && !ReadStackCopy(s, ra_slot, &next_ip)) {
      return unreadable(ra_slot);
    }
    // libunwind fails such a step with a marker frame: leave it to libunwind.
    if (next_ip == ip && next_cfa == cfa) return false;
    // The outermost frame: an undefined return address (libunwind's step
    // gives 0 then), or x86-64's ABI mark, an undefined RBP.
    const bool outermost =
        rule.return_address != FrameRule::Saved::kAtCfa || rule.rbp == FrameRule::Saved::kUndefined;
    if (!bounds.walk_past_stop_symbols && HoldsAnchor(s, cfa, next_cfa, outermost)) {
      result->reached_stop = true;
      return true;
    }
    if (outermost) return true;
    if (rule.rbp == FrameRule::Saved::kAtCfa) {
      rbp_slot = next_cfa + static_cast<uint64_t>(int64_t{rule.rbp_offset});
      rbp_read = false;
    }
    ip = next_ip;
    cfa = next_cfa;
  }
}

}  // namespace ebpf
