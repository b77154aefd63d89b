// BTF offsets: see btf_offsets.h.
#include "btf_offsets.h"

#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

namespace ebpf {
namespace {

struct BtfDeleter {
  void operator()(struct btf* btf) const { btf__free(btf); }
};
using BtfPtr = std::unique_ptr<struct btf, BtfDeleter>;

// Strips typedefs and qualifiers.
const struct btf_type* Resolve(const struct btf* btf, uint32_t type_id) {
  int id = btf__resolve_type(btf, type_id);
  if (id < 0) return nullptr;
  return btf__type_by_id(btf, id);
}

// Bit offset of `name` inside composite type `t`, searching anonymous members
// recursively. Sets *member_type to the member's type id.
std::optional<uint64_t> FindMember(const struct btf* btf, const struct btf_type* t,
                                   const std::string& name, uint32_t* member_type, int depth = 0) {
  if (!t || !btf_is_composite(t) || depth > 8) return std::nullopt;
  const struct btf_member* m = btf_members(t);
  for (uint16_t i = 0; i < btf_vlen(t); ++i, ++m) {
    const char* mname = btf__name_by_offset(btf, m->name_off);
    uint64_t bit_off = btf_member_bit_offset(t, i);
    if (mname && *mname) {
      if (name == mname) {
        *member_type = m->type;
        return bit_off;
      }
      continue;
    }
    // Anonymous struct/union: its members belong to the parent.
    auto inner = FindMember(btf, Resolve(btf, m->type), name, member_type, depth + 1);
    if (inner) return bit_off + *inner;
  }
  return std::nullopt;
}

Result<BtfPtr> ParseBtf(const std::string& btf_path) {
  struct stat st;
  if (::stat(btf_path.c_str(), &st) != 0)
    return Status::Error("cannot read BTF " + btf_path + ": " + strerror(errno));
  if (st.st_size == 0) return Status::Error("BTF file " + btf_path + " is empty");
  // libbpf prints its own diagnostics on parse errors; ours is the message.
  libbpf_print_fn_t old = libbpf_set_print(nullptr);
  BtfPtr btf(btf__parse(btf_path.c_str(), nullptr));
  libbpf_set_print(old);
  if (!btf || libbpf_get_error(btf.get())) {
    btf.release();
    return Status::Error("cannot parse BTF " + btf_path + " (not a valid BTF file)");
  }
  return btf;
}

Result<uint64_t> MemberOffset(const struct btf* btf, const std::string& btf_path,
                              const std::string& struct_name, const std::string& member_path) {
  int32_t id = btf__find_by_name_kind(btf, struct_name.c_str(), BTF_KIND_STRUCT);
  if (id < 0) return Status::Error("struct " + struct_name + " not found in BTF " + btf_path);
  const struct btf_type* t = btf__type_by_id(btf, id);

  uint64_t bits = 0;
  size_t start = 0;
  while (true) {
    size_t dot = member_path.find('.', start);
    std::string part = member_path.substr(start, dot == std::string::npos ? dot : dot - start);
    uint32_t member_type = 0;
    auto off = FindMember(btf, t, part, &member_type);
    if (!off)
      return Status::Error("member " + member_path + " not found in struct " + struct_name +
                           " in BTF " + btf_path);
    bits += *off;
    if (dot == std::string::npos) break;
    t = Resolve(btf, member_type);
    start = dot + 1;
  }
  if (bits % 8 != 0)
    return Status::Error("member " + struct_name + "." + member_path + " is a bit field");
  return bits / 8;
}

}  // namespace

Result<uint64_t> BtfMemberOffset(const std::string& btf_path, const std::string& struct_name,
                                 const std::string& member_path) {
  auto btf = ParseBtf(btf_path);
  if (!btf.ok()) return btf.status();
  return MemberOffset(btf->get(), btf_path, struct_name, member_path);
}

Result<KernelOffsets> ReadKernelOffsets(const std::string& btf_path) {
  // Parsed once: the kernel's BTF is several MiB, and this is start-up time.
  auto btf = ParseBtf(btf_path);
  if (!btf.ok()) return Status::Error(btf.error() + kKernelOffsetFlagsHint);
  KernelOffsets offsets;
  auto fs = MemberOffset(btf->get(), btf_path, "task_struct", "thread.fsbase");
  if (!fs.ok()) return Status::Error(fs.error() + kKernelOffsetFlagsHint);
  auto stack = MemberOffset(btf->get(), btf_path, "task_struct", "stack");
  if (!stack.ok()) return Status::Error(stack.error() + kKernelOffsetFlagsHint);
  offsets.fs_base = *fs;
  offsets.stack = *stack;
  auto mm = MemberOffset(btf->get(), btf_path, "task_struct", "mm");
  if (mm.ok()) offsets.mm = *mm;
  return offsets;
}

}  // namespace ebpf
