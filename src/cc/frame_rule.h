// FrameRule: how to step from one x86-64 frame to its caller, in the few
// shapes compiled code really uses, as read from .eh_frame (eh_frame_reader.h).
//
// It is what the unwinder's fast path needs and nothing more: the CFA (the
// caller's stack pointer) as RSP or RBP plus an offset, where the return
// address and the caller's RBP are. Rules for the other registers are not
// kept: the fast path gives up on any frame whose CFA is based on another
// register, so it never needs their values. A small POD, cached beside each
// frame name (proc_name_cache.h).
#pragma once

#include <cstdint>

namespace ebpf {

struct FrameRule {
  enum class CfaBase : uint8_t { kRsp, kRbp };
  enum class Saved : uint8_t {
    kSame,       // the register keeps its value in the caller
    kAtCfa,      // saved at CFA + offset
    kUndefined,  // no value: for the return address, the outermost frame
  };

  // Usable by the fast path: a CFA on RSP or RBP, the return address at
  // CFA+n or undefined, RBP same/saved/undefined, not a signal frame, and
  // nothing libunwind would evaluate (expressions, register rules) or refuse.
  // When false the other fields mean nothing.
  bool simple = false;
  CfaBase cfa_base = CfaBase::kRsp;
  Saved return_address = Saved::kUndefined;
  Saved rbp = Saved::kSame;
  int32_t cfa_offset = 0;
  int32_t return_address_offset = 0;  // from the CFA, when kAtCfa
  int32_t rbp_offset = 0;             // from the CFA, when kAtCfa

  bool operator==(const FrameRule& o) const {
    if (simple != o.simple) return false;
    if (!simple) return true;
    return cfa_base == o.cfa_base && cfa_offset == o.cfa_offset &&
           return_address == o.return_address && rbp == o.rbp &&
           (return_address != Saved::kAtCfa || return_address_offset == o.return_address_offset) &&
           (rbp != Saved::kAtCfa || rbp_offset == o.rbp_offset);
  }
  bool operator!=(const FrameRule& o) const { return !(*this == o); }
};

}  // namespace ebpf
