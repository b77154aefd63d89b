// EhFrameReader: our own reader of x86-64 .eh_frame call frame information,
// over the bytes of an already-mapped ELF image. Given an address in the
// file's own terms it finds the FDE through the .eh_frame_hdr binary-search
// table, parses the FDE and its CIE, runs the CIE's initial instructions and
// the FDE's instructions up to the address, and returns the row as a
// FrameRule (frame_rule.h).
//
// It reads what libunwind reads, the same way (the fast path's frames must be
// libunwind's frames): the row at an address includes the rows starting at it;
// anything libunwind would evaluate, misread or refuse (expressions, register
// rules, DW_CFA_set_loc, register numbers past the return-address column, an
// unbalanced restore_state) makes the rule "not simple", and so does a
// signal frame ('S'). Every read is bounds-checked against the image: a
// truncated or hostile file gives "no rule" (simple == false), never a crash.
// Allocates nothing.
#pragma once

#include <cstdint>

#include "elf_image.h"
#include "frame_rule.h"
#include "native_module.h"

namespace ebpf {

class EhFrameReader {
 public:
  // `table` is the module's .eh_frame_hdr table (NativeModule::unwind_table());
  // both must outlive the reader.
  EhFrameReader(const ElfImage& image, const UnwindTableLocation& table)
      : image_(image), table_(table) {}
  explicit EhFrameReader(const NativeModule& module)
      : EhFrameReader(module.image(), module.unwind_table()) {}

  // The rule for the row holding `vaddr`; simple == false when there is no
  // FDE for it, the CFI cannot be read, or the row is not simple.
  FrameRule RuleFor(uint64_t vaddr) const;

  // The FDE covering `vaddr`: [pc_begin, pc_end) in ELF addresses.
  struct FdeRange {
    bool found = false;
    uint64_t pc_begin = 0, pc_end = 0;
  };
  FdeRange FindFde(uint64_t vaddr) const;

 private:
  const ElfImage& image_;
  const UnwindTableLocation& table_;
};

}  // namespace ebpf
