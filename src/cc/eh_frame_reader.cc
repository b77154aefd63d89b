// EhFrameReader: see eh_frame_reader.h. Written from the DWARF 5 standard
// (section 6.4) and the LSB's .eh_frame description; libunwind's behaviour is
// matched where the fast path must agree with it (noted below).
#include "eh_frame_reader.h"

#include <cstring>
#include <limits>

namespace ebpf {

namespace {

// Pointer encodings (DW_EH_PE_*).
constexpr uint8_t kPeOmit = 0xff, kPeIndirect = 0x80;
constexpr uint8_t kPePcrel = 0x10, kPeDatarel = 0x30;

// DWARF register numbers on x86-64, and how many libunwind tracks (it refuses
// CFI naming any higher register).
constexpr uint64_t kRbp = 6, kRsp = 7, kReturnAddress = 16, kTrackedRegisters = 17;
constexpr size_t kMaxRememberedStates = 8;
constexpr size_t kMaxAugmentation = 8;

// A bounds-checked reader over image bytes [p, end) whose first byte is at
// ELF address `vaddr`. A read past the end sets !ok() and yields zero.
class ByteReader {
 public:
  ByteReader() = default;
  ByteReader(const uint8_t* p, const uint8_t* end, uint64_t vaddr)
      : p_(p), end_(end), vaddr_(vaddr), ok_(p != nullptr) {}

  bool ok() const { return ok_; }
  bool at_end() const { return p_ >= end_; }
  uint64_t vaddr() const { return vaddr_; }

  uint8_t U8() { return static_cast<uint8_t>(Fixed(1)); }
  uint16_t U16() { return static_cast<uint16_t>(Fixed(2)); }
  uint32_t U32() { return static_cast<uint32_t>(Fixed(4)); }
  uint64_t U64() { return Fixed(8); }

  uint64_t Uleb() {
    uint64_t value = 0;
    for (unsigned shift = 0; ok_; shift += 7) {
      uint8_t byte = U8();
      if (shift >= 64) {
        ok_ = false;  // longer than any 64-bit value
        break;
      }
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return value;
    }
    return 0;
  }

  int64_t Sleb() {
    uint64_t value = 0;
    for (unsigned shift = 0; ok_; shift += 7) {
      uint8_t byte = U8();
      if (shift >= 64) {
        ok_ = false;
        break;
      }
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) {
        if (shift + 7 < 64 && (byte & 0x40)) value |= ~uint64_t{0} << (shift + 7);
        return static_cast<int64_t>(value);
      }
    }
    return 0;
  }

  void Skip(uint64_t n) {
    if (!ok_ || n > static_cast<uint64_t>(end_ - p_)) {
      ok_ = false;
      return;
    }
    p_ += n;
    vaddr_ += n;
  }

  // The next n bytes as a reader of their own; this one moves past them.
  ByteReader Take(uint64_t n) {
    ByteReader sub = *this;
    Skip(n);
    if (!ok_) return ByteReader();
    sub.end_ = sub.p_ + n;
    return sub;
  }

  // An encoded pointer. `datarel_base` of 0 refuses datarel (see FDE below);
  // `allow_indirect` accepts the indirect bit without following it.
  bool Encoded(uint8_t enc, uint64_t datarel_base, bool allow_indirect, uint64_t* out) {
    if (enc == kPeOmit) return false;
    const uint64_t field_vaddr = vaddr_;
    uint64_t v = 0;
    switch (enc & 0x0f) {
      case 0x00:  // absptr
      case 0x04:  // udata8
      case 0x0c:  // sdata8
        v = U64();
        break;
      case 0x01:
        v = Uleb();
        break;
      case 0x02:
        v = U16();
        break;
      case 0x03:
        v = U32();
        break;
      case 0x09:
        v = static_cast<uint64_t>(Sleb());
        break;
      case 0x0a:
        v = static_cast<uint64_t>(static_cast<int64_t>(static_cast<int16_t>(U16())));
        break;
      case 0x0b:
        v = static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(U32())));
        break;
      default:
        return false;
    }
    switch (enc & 0x70) {
      case 0:
        break;
      case kPePcrel:
        v += field_vaddr;
        break;
      case kPeDatarel:
        if (datarel_base == 0) return false;
        v += datarel_base;
        break;
      default:  // textrel, funcrel, aligned: not used on x86-64 Linux
        return false;
    }
    if ((enc & kPeIndirect) && !allow_indirect) return false;
    *out = v;
    return ok_;
  }

 private:
  uint64_t Fixed(size_t n) {
    if (!ok_ || static_cast<size_t>(end_ - p_) < n) {
      ok_ = false;
      return 0;
    }
    uint64_t v = 0;
    memcpy(&v, p_, n);  // x86-64: little-endian like the file
    p_ += n;
    vaddr_ += n;
    return v;
  }

  const uint8_t* p_ = nullptr;
  const uint8_t* end_ = nullptr;
  uint64_t vaddr_ = 0;
  bool ok_ = false;
};

// The file-backed bytes of the PT_LOAD segment holding vaddr, from vaddr on.
ByteReader ReaderAt(const ElfImage& image, uint64_t vaddr) {
  for (const ElfLoadSegment& seg : image.load_segments()) {
    if (vaddr < seg.vaddr || vaddr - seg.vaddr >= seg.filesz) continue;
    std::string_view bytes = image.Range(seg.offset, seg.filesz);
    uint64_t rel = vaddr - seg.vaddr;
    if (rel >= bytes.size()) return ByteReader();
    const auto* base = reinterpret_cast<const uint8_t*>(bytes.data());
    return ByteReader(base + rel, base + bytes.size(), vaddr);
  }
  return ByteReader();
}

struct Cie {
  uint64_t code_align = 0;
  int64_t data_align = 0;
  uint64_t return_address_register = 0;
  uint8_t fde_encoding = 0;  // absptr
  bool sized_augmentation = false;
  bool signal_frame = false;
  ByteReader instructions;
};

struct Fde {
  Cie cie;
  uint64_t pc_begin = 0, pc_end = 0;
  ByteReader instructions;
};

// A length-prefixed .eh_frame entry: its body, or !ok() for a terminator,
// a 64-bit DWARF entry (never emitted on x86-64 Linux) or a bad length.
ByteReader EntryBody(const ElfImage& image, uint64_t vaddr) {
  ByteReader r = ReaderAt(image, vaddr);
  uint32_t length = r.U32();
  if (!r.ok() || length == 0 || length == 0xffffffff) return ByteReader();
  return r.Take(length);
}

bool ParseCie(const ElfImage& image, uint64_t vaddr, uint64_t datarel_base, Cie* cie) {
  ByteReader body = EntryBody(image, vaddr);
  if (body.U32() != 0) return false;  // not a CIE
  uint8_t version = body.U8();
  if (version != 1 && version != 3) return false;
  char augmentation[kMaxAugmentation + 1] = {};
  for (size_t i = 0;; ++i) {
    uint8_t c = body.U8();
    if (!body.ok() || i > kMaxAugmentation) return false;
    augmentation[i] = static_cast<char>(c);
    if (c == 0) break;
  }
  cie->code_align = body.Uleb();
  cie->data_align = body.Sleb();
  cie->return_address_register = version == 1 ? body.U8() : body.Uleb();
  if (augmentation[0] == 'z') {
    cie->sized_augmentation = true;
    ByteReader data = body.Take(body.Uleb());
    for (const char* a = augmentation + 1; *a; ++a) {
      uint64_t ignored = 0;
      switch (*a) {
        case 'R':
          cie->fde_encoding = data.U8();
          break;
        case 'P':  // the personality routine: only its size matters here
          if (!data.Encoded(data.U8(), datarel_base, true, &ignored)) return false;
          break;
        case 'L':
          data.U8();
          break;
        case 'S':
          cie->signal_frame = true;
          break;
        default:
          return false;
      }
    }
    if (!data.ok()) return false;
  } else if (augmentation[0] != 0) {
    return false;  // an augmentation we cannot skip without its size
  }
  cie->instructions = body;
  return body.ok();
}

bool LocateFde(const ElfImage& image, const UnwindTableLocation& table, uint64_t vaddr, Fde* fde) {
  if (!table.usable || table.fde_count == 0 ||
      table.fde_count > std::numeric_limits<size_t>::max() / 8) {
    return false;
  }
  const uint8_t* entries = image.BytesAtVaddr(table.table_vaddr, table.fde_count * 8, true);
  if (!entries) return false;
  const uint64_t hdr = table.eh_frame_hdr_vaddr;
  auto entry = [&](size_t i, int index) {
    int32_t v;
    memcpy(&v, entries + i * 8 + index * 4, 4);
    return static_cast<int64_t>(v);
  };
  // The last entry starting at or before vaddr (datarel|sdata4: relative to
  // .eh_frame_hdr).
  const int64_t target = static_cast<int64_t>(vaddr - hdr);
  size_t lo = 0, hi = table.fde_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (entry(mid, 0) <= target) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo == 0) return false;
  const uint64_t fde_vaddr = hdr + static_cast<uint64_t>(entry(lo - 1, 1));

  ByteReader body = EntryBody(image, fde_vaddr);
  const uint64_t cie_field = body.vaddr();
  uint32_t cie_pointer = body.U32();
  if (!body.ok() || cie_pointer == 0) return false;
  if (!ParseCie(image, cie_field - cie_pointer, hdr, &fde->cie)) return false;
  // pc_begin is read without datarel: libunwind's remote lookup has no data
  // base (gp) for it, and GCC and clang only emit pcrel here.
  uint64_t pc_begin = 0, pc_range = 0;
  if (!body.Encoded(fde->cie.fde_encoding, 0, false, &pc_begin) ||
      !body.Encoded(fde->cie.fde_encoding & 0x0f, 0, false, &pc_range)) {
    return false;
  }
  if (fde->cie.sized_augmentation) body.Skip(body.Uleb());
  if (!body.ok()) return false;
  fde->pc_begin = pc_begin;
  fde->pc_end = pc_begin + pc_range;
  fde->instructions = body;
  return vaddr >= fde->pc_begin && vaddr < fde->pc_end;
}

// One row of the CFI table, for the registers libunwind tracks.
struct Row {
  enum class Where : uint8_t { kSame, kUndefined, kAtCfa, kOther };
  struct Register {
    Where where = Where::kSame;
    int64_t offset = 0;
  };
  bool cfa_defined = false;
  uint64_t cfa_register = 0;
  int64_t cfa_offset = 0;
  Register regs[kTrackedRegisters];
};

enum class Run { kOk, kNotSimple };

// value * data alignment factor, wrapping as libunwind's word arithmetic does
// (and as signed overflow may not).
int64_t Factored(uint64_t value, int64_t factor) {
  return static_cast<int64_t>(value * static_cast<uint64_t>(factor));
}

// Runs CFI instructions from `loc` while the current location is at or before
// `target` (libunwind's rule: the row starting at the address applies).
Run Execute(ByteReader code, const Cie& cie, uint64_t loc, uint64_t target, const Row& initial,
            Row* row, Row* stack, size_t* depth) {
  // The rule instructions name a register (in the opcode or as a ULEB) and
  // give it a new rule; one the fast path does not track makes the row not
  // simple. `saved_at` is the CFA-relative offset of the *_offset forms, whose
  // register operand is read into `n` first (argument order is unspecified).
  auto set = [&](uint64_t n, Row::Where where, int64_t saved_at = 0) {
    if (n >= kTrackedRegisters) return false;
    row->regs[n] = {where, saved_at};
    return true;
  };
  auto restore = [&](uint64_t n) {
    if (n >= kTrackedRegisters) return false;
    row->regs[n] = initial.regs[n];
    return true;
  };
  while (!code.at_end() && loc <= target) {
    uint8_t op = code.U8();
    const uint8_t operand = op & 0x3f;
    uint64_t n = 0;
    switch (op & 0xc0) {
      case 0x40:  // advance_loc
        loc += operand * cie.code_align;
        continue;
      case 0x80:  // offset
        if (!set(operand, Row::Where::kAtCfa, Factored(code.Uleb(), cie.data_align)) || !code.ok())
          return Run::kNotSimple;
        continue;
      case 0xc0:  // restore
        if (!restore(operand)) return Run::kNotSimple;
        continue;
    }
    switch (op) {
      case 0x00:  // nop
        break;
      case 0x02:  // advance_loc1
        loc += code.U8() * cie.code_align;
        break;
      case 0x03:  // advance_loc2
        loc += code.U16() * cie.code_align;
        break;
      case 0x04:  // advance_loc4
        loc += code.U32() * cie.code_align;
        break;
      case 0x05:  // offset_extended
        n = code.Uleb();
        if (!set(n, Row::Where::kAtCfa, Factored(code.Uleb(), cie.data_align)))
          return Run::kNotSimple;
        break;
      case 0x11:  // offset_extended_sf
        n = code.Uleb();
        if (!set(n, Row::Where::kAtCfa,
                 Factored(static_cast<uint64_t>(code.Sleb()), cie.data_align)))
          return Run::kNotSimple;
        break;
      case 0x06:  // restore_extended
        if (!restore(code.Uleb())) return Run::kNotSimple;
        break;
      case 0x07:  // undefined
        if (!set(code.Uleb(), Row::Where::kUndefined)) return Run::kNotSimple;
        break;
      case 0x08:  // same_value
        if (!set(code.Uleb(), Row::Where::kSame)) return Run::kNotSimple;
        break;
      case 0x0a:  // remember_state
        if (*depth == kMaxRememberedStates) return Run::kNotSimple;
        stack[(*depth)++] = *row;
        break;
      case 0x0b:                                  // restore_state
        if (*depth == 0) return Run::kNotSimple;  // libunwind fails the step
        *row = stack[--*depth];
        break;
      case 0x0c:  // def_cfa
        row->cfa_register = code.Uleb();
        row->cfa_offset = static_cast<int64_t>(code.Uleb());
        row->cfa_defined = true;
        if (row->cfa_register >= kTrackedRegisters) return Run::kNotSimple;
        break;
      case 0x12:  // def_cfa_sf
        row->cfa_register = code.Uleb();
        row->cfa_offset = Factored(static_cast<uint64_t>(code.Sleb()), cie.data_align);
        row->cfa_defined = true;
        if (row->cfa_register >= kTrackedRegisters) return Run::kNotSimple;
        break;
      case 0x0d:  // def_cfa_register
        row->cfa_register = code.Uleb();
        row->cfa_defined = true;
        if (row->cfa_register >= kTrackedRegisters) return Run::kNotSimple;
        break;
      case 0x0e:  // def_cfa_offset
        row->cfa_offset = static_cast<int64_t>(code.Uleb());
        break;
      case 0x13:  // def_cfa_offset_sf
        row->cfa_offset = Factored(static_cast<uint64_t>(code.Sleb()), cie.data_align);
        break;
      case 0x2e:  // GNU_args_size: only matters to resuming, not to stepping
        code.Uleb();
        break;
      default:
        // set_loc, register, the expressions, val_*, vendor extensions:
        // not representable, or read differently by libunwind.
        return Run::kNotSimple;
    }
    if (!code.ok()) return Run::kNotSimple;
  }
  return code.ok() ? Run::kOk : Run::kNotSimple;
}

bool FitsInt32(int64_t v) {
  return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
}

FrameRule ToRule(const Row& row, const Cie& cie) {
  FrameRule rule;
  if (!row.cfa_defined || !FitsInt32(row.cfa_offset)) return rule;
  if (row.cfa_register == kRsp) {
    rule.cfa_base = FrameRule::CfaBase::kRsp;
  } else if (row.cfa_register == kRbp) {
    rule.cfa_base = FrameRule::CfaBase::kRbp;
  } else {
    return rule;
  }
  rule.cfa_offset = static_cast<int32_t>(row.cfa_offset);
  // libunwind takes the caller's RSP to be the CFA only while RSP has no rule.
  if (row.regs[kRsp].where != Row::Where::kSame) return rule;
  const Row::Register& ra = row.regs[kReturnAddress];
  if (ra.where == Row::Where::kAtCfa && FitsInt32(ra.offset)) {
    rule.return_address = FrameRule::Saved::kAtCfa;
    rule.return_address_offset = static_cast<int32_t>(ra.offset);
  } else if (ra.where == Row::Where::kUndefined) {
    rule.return_address = FrameRule::Saved::kUndefined;
  } else {
    return rule;
  }
  const Row::Register& rbp = row.regs[kRbp];
  if (rbp.where == Row::Where::kAtCfa && FitsInt32(rbp.offset)) {
    rule.rbp = FrameRule::Saved::kAtCfa;
    rule.rbp_offset = static_cast<int32_t>(rbp.offset);
  } else if (rbp.where == Row::Where::kSame || rbp.where == Row::Where::kUndefined) {
    rule.rbp =
        rbp.where == Row::Where::kSame ? FrameRule::Saved::kSame : FrameRule::Saved::kUndefined;
  } else {
    return rule;
  }
  rule.simple = !cie.signal_frame && cie.return_address_register == kReturnAddress;
  return rule;
}

}  // namespace

EhFrameReader::FdeRange EhFrameReader::FindFde(uint64_t vaddr) const {
  FdeRange range;
  Fde fde;
  if (!LocateFde(image_, table_, vaddr, &fde)) return range;
  range.found = true;
  range.pc_begin = fde.pc_begin;
  range.pc_end = fde.pc_end;
  return range;
}

FrameRule EhFrameReader::RuleFor(uint64_t vaddr) const {
  Fde fde;
  if (!LocateFde(image_, table_, vaddr, &fde)) return FrameRule();
  if (fde.cie.signal_frame || fde.cie.return_address_register != kReturnAddress) {
    return FrameRule();
  }
  Row initial, row;
  Row stack[kMaxRememberedStates];
  size_t depth = 0;
  constexpr uint64_t kAll = std::numeric_limits<uint64_t>::max();
  if (Execute(fde.cie.instructions, fde.cie, fde.pc_begin, kAll, initial, &row, stack, &depth) !=
          Run::kOk ||
      depth != 0) {
    return FrameRule();
  }
  initial = row;
  if (Execute(fde.instructions, fde.cie, fde.pc_begin, vaddr, initial, &row, stack, &depth) !=
      Run::kOk) {
    return FrameRule();
  }
  return ToRule(row, fde.cie);
}

}  // namespace ebpf
