// Tests for EhFrameReader on real files: for addresses all over the FDEs of
// this test's own binary, the C library, the native fixture libraries and a
// pyenv libpython, the rule must be what libunwind (the same library the
// unwinder uses) computes when it steps a synthetic frame at that address;
// and corrupt bytes must give "no rule", never a crash.
#include <gtest/gtest.h>
#include <libunwind.h>
#include <link.h>

#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "eh_frame_reader.h"
#include "native_fixtures/native_test_helpers.h"
#include "native_module.h"
#include "support/test_support.h"
#include "unwind_accessors.h"

namespace ebpf {
namespace {

// A module mapped at its own addresses (bias 0) over a synthetic stack whose
// every byte address X reads as kTag | X, so a value read back says where it
// was read from.
constexpr uint64_t kTag = 0x5a00000000000000ULL;
// Slots below RSP are readable too: an epilogue's rows still say where RBP was
// saved after the pop.
constexpr uint64_t kStackBase = 0x7f0000000000ULL, kStackBelow = 0x8000, kStackSize = 0x10000;
constexpr uint64_t kFramePointer = kStackBase + 0x8000;

struct Oracle {
  const NativeModule* module = nullptr;
  uint64_t ip = 0;
};

int FindProcInfo(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t* pi, int need, void* arg) {
  const NativeModule& m = *static_cast<Oracle*>(arg)->module;
  unw_dyn_info_t di;
  if (!DescribeUnwindTable(m, 0, ip, &di)) return -UNW_ENOINFO;
  return SearchUnwindTable(as, ip, &di, pi, need, arg);
}
int AccessMem(unw_addr_space_t, unw_word_t addr, unw_word_t* val, int write, void* arg) {
  if (write) return -UNW_EINVAL;
  if (addr >= kStackBase - kStackBelow && addr + 8 <= kStackBase + kStackSize) {
    *val = kTag | addr;
    return 0;
  }
  const uint8_t* p = static_cast<Oracle*>(arg)->module->image().BytesAtVaddr(addr, 8, true);
  if (!p) return -UNW_EINVAL;
  memcpy(val, p, 8);
  return 0;
}
int AccessReg(unw_addr_space_t, unw_regnum_t reg, unw_word_t* val, int write, void* arg) {
  if (write) return -UNW_EINVAL;
  if (reg == UNW_X86_64_RIP)
    *val = static_cast<Oracle*>(arg)->ip;
  else if (reg == UNW_X86_64_RSP)
    *val = kStackBase;
  else if (reg == UNW_X86_64_RBP)
    *val = kFramePointer;
  else
    return -UNW_EBADREG;
  return 0;
}
int GetProcName(unw_addr_space_t, unw_word_t, char*, size_t, unw_word_t*, void*) {
  return -UNW_ENOINFO;
}

struct AddrSpaceDeleter {
  void operator()(unw_addr_space* as) const { unw_destroy_addr_space(as); }
};

// Steps libunwind once from a leaf at `vaddr` and checks `rule` against it.
class LibunwindStep {
 public:
  LibunwindStep() {
    unw_accessors_t a =
        ReadOnlyRemoteAccessors(&FindProcInfo, &AccessMem, &AccessReg, &GetProcName);
    as_.reset(unw_create_addr_space(&a, 0));
    unw_set_caching_policy(as_.get(), UNW_CACHE_NONE);
  }

  // "" when libunwind agrees with the rule, else what differs.
  std::string Check(const NativeModule& module, uint64_t vaddr, const FrameRule& rule) {
    Oracle oracle{&module, vaddr};
    unw_cursor_t cursor;
    if (unw_init_remote(&cursor, as_.get(), &oracle) < 0) return "unw_init_remote failed";
    int ret = unw_step(&cursor);
    if (ret < 0) return "libunwind cannot step: " + std::to_string(ret);
    unw_word_t cfa = 0, ip = 0, rbp = 0;
    unw_get_reg(&cursor, UNW_X86_64_RSP, &cfa);
    unw_get_reg(&cursor, UNW_X86_64_RIP, &ip);
    int rbp_ret = unw_get_reg(&cursor, UNW_X86_64_RBP, &rbp);
    uint64_t base = rule.cfa_base == FrameRule::CfaBase::kRsp ? kStackBase : kFramePointer;
    uint64_t want_cfa = base + static_cast<int64_t>(rule.cfa_offset);
    if (cfa != want_cfa) return "CFA " + Hex(cfa) + " != " + Hex(want_cfa);
    if (rule.rbp == FrameRule::Saved::kUndefined) {
      return ret == 0 ? "" : "undefined RBP but libunwind goes on";
    }
    if (rule.return_address == FrameRule::Saved::kUndefined) {
      if (ret != 0 || ip != 0) return "undefined return address but libunwind goes on";
    } else {
      uint64_t want = kTag | (want_cfa + static_cast<int64_t>(rule.return_address_offset));
      if (ret != 1 || ip != want) return "return address " + Hex(ip) + " != " + Hex(want);
    }
    if (ret == 0) return "";
    uint64_t want_rbp = rule.rbp == FrameRule::Saved::kSame
                            ? kFramePointer
                            : kTag | (want_cfa + static_cast<int64_t>(rule.rbp_offset));
    if (rbp_ret < 0 || rbp != want_rbp) return "RBP " + Hex(rbp) + " != " + Hex(want_rbp);
    return "";
  }

 private:
  static std::string Hex(uint64_t v) {
    char buf[32];
    snprintf(buf, sizeof(buf), "%#llx", static_cast<unsigned long long>(v));
    return buf;
  }
  std::unique_ptr<unw_addr_space, AddrSpaceDeleter> as_;
};

// Addresses spread over the module's FDEs: each FDE's first, second, middle
// and last byte and a few random ones.
std::vector<uint64_t> AddressesToCheck(const NativeModule& module, size_t max_fdes) {
  std::vector<uint64_t> out;
  const UnwindTableLocation& t = module.unwind_table();
  const uint8_t* table = module.image().BytesAtVaddr(t.table_vaddr, t.fde_count * 8, true);
  if (!table) return out;
  std::mt19937_64 rng(42);
  size_t stride = std::max<size_t>(1, t.fde_count / max_fdes);
  EhFrameReader reader(module);
  for (size_t i = 0; i < t.fde_count; i += stride) {
    int32_t start;
    memcpy(&start, table + i * 8, 4);
    auto fde = reader.FindFde(t.eh_frame_hdr_vaddr + start);
    if (!fde.found) continue;
    uint64_t len = fde.pc_end - fde.pc_begin;
    out.push_back(fde.pc_begin);
    if (len > 1) out.push_back(fde.pc_begin + 1);
    out.push_back(fde.pc_begin + len / 2);
    out.push_back(fde.pc_end - 1);
    for (int k = 0; k < 4; ++k) out.push_back(fde.pc_begin + rng() % len);
  }
  return out;
}

std::string OwnLibc() {
  std::string found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* arg) {
        std::string name = info->dlpi_name ? info->dlpi_name : "";
        if (name.find("/libc.so") != std::string::npos) *static_cast<std::string*>(arg) = name;
        return 0;
      },
      &found);
  return found;
}

void ExpectRulesMatchLibunwind(const std::string& path, size_t min_checked = 1000) {
  SCOPED_TRACE(path);
  NativeModuleLoadOptions options;
  options.load_symbols = false;
  auto module = NativeModule::LoadFromPath(path, options);
  ASSERT_TRUE(module.ok()) << module.error();
  ASSERT_TRUE((*module)->unwind_table().usable);
  EhFrameReader reader(**module);
  LibunwindStep libunwind;
  size_t simple = 0, checked = 0, mismatches = 0;
  for (uint64_t vaddr : AddressesToCheck(**module, 2000)) {
    ++checked;
    FrameRule rule = reader.RuleFor(vaddr);
    if (!rule.simple) continue;
    ++simple;
    std::string diff = libunwind.Check(**module, vaddr, rule);
    if (!diff.empty() && ++mismatches <= 10) {
      ADD_FAILURE() << std::hex << "at 0x" << vaddr << ": " << diff;
    }
  }
  EXPECT_EQ(mismatches, 0u);
  // Compiled code is nearly all simple rows; a reader that gave up on most
  // of it would make the fast path useless.
  EXPECT_GE(checked, min_checked);
  std::cout << path << ": " << simple << " simple rules of " << checked
            << " addresses, all as libunwind steps\n";
  EXPECT_GT(simple * 100, checked * 90) << simple << " simple of " << checked;
}

TEST(EhFrameReaderTest, OwnBinaryRulesMatchLibunwind) {
  ExpectRulesMatchLibunwind("/proc/self/exe");
}

TEST(EhFrameReaderTest, LibcRulesMatchLibunwind) {
  std::string libc = OwnLibc();
  ASSERT_FALSE(libc.empty());
  ExpectRulesMatchLibunwind(libc);
}

TEST(EhFrameReaderTest, FixtureLibraryRulesMatchLibunwind) {
  PYPERF_REQUIRE_NATIVE_FIXTURES();
  ExpectRulesMatchLibunwind(pyperf_fixture::FixtureDir() + "/full/libpyperf_fixture_c.so", 20);
  ExpectRulesMatchLibunwind(pyperf_fixture::FixtureDir() + "/libpyperf_fixture_cxx.so", 20);
}

TEST(EhFrameReaderTest, PyenvLibpythonRulesMatchLibunwind) {
  const char* home = getenv("HOME");
  std::string root =
      getenv("PYENV_ROOT") ? getenv("PYENV_ROOT") : std::string(home ? home : "") + "/.pyenv";
  std::string path = root + "/versions/3.11.7/lib/libpython3.11.so.1.0";
  if (!pyperf_test::FileExists(path)) PYPERF_SKIP_OR_FAIL("no pyenv libpython at " + path);
  ExpectRulesMatchLibunwind(path);
}

TEST(EhFrameReaderTest, AddressOutsideEveryFdeHasNoRule) {
  auto module = NativeModule::LoadFromPath("/proc/self/exe", NativeModuleLoadOptions());
  ASSERT_TRUE(module.ok()) << module.error();
  EhFrameReader reader(**module);
  EXPECT_FALSE(reader.RuleFor(0).simple);
  EXPECT_FALSE(reader.RuleFor(~uint64_t{0}).simple);
  EXPECT_FALSE(reader.FindFde(0).found);
}

std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// Corrupt .eh_frame/.eh_frame_hdr bytes: every rule is either the true one
// (the damage missed it) or none; truncated images likewise; and garbage
// never crashes (run under the sanitizers too).
TEST(EhFrameReaderTest, CorruptOrTruncatedBytesGiveNoRuleNeverACrash) {
  std::string libc = OwnLibc();
  ASSERT_FALSE(libc.empty());
  const std::vector<uint8_t> original = ReadBytes(libc);
  ASSERT_FALSE(original.empty());
  auto good =
      NativeModule::LoadFromMemory(original.data(), original.size(), {"", "", false, false});
  ASSERT_TRUE(good.ok()) << good.error();
  std::vector<uint64_t> addresses = AddressesToCheck(**good, 300);
  ASSERT_FALSE(addresses.empty());
  std::vector<FrameRule> truth;
  EhFrameReader good_reader(**good);
  for (uint64_t a : addresses) truth.push_back(good_reader.RuleFor(a));
  // The file offsets of .eh_frame_hdr .. end of its segment (.eh_frame follows).
  const UnwindTableLocation& t = (*good)->unwind_table();
  const ElfLoadSegment* seg = (*good)->image().SegmentForVaddr(t.eh_frame_hdr_vaddr);
  ASSERT_NE(seg, nullptr);
  const uint64_t from = seg->offset + (t.eh_frame_hdr_vaddr - seg->vaddr);
  const uint64_t to = std::min<uint64_t>(seg->offset + seg->filesz, original.size());
  ASSERT_LT(from, to);

  std::mt19937_64 rng(7);
  for (int round = 0; round < 40; ++round) {
    std::vector<uint8_t> bytes = original;
    bool truncate = round % 4 == 3;
    if (truncate) {
      bytes.resize(from + 8 + rng() % (to - from));
    } else {
      int flips = 1 + static_cast<int>(rng() % (round < 20 ? 8 : 4000));
      for (int i = 0; i < flips; ++i)
        bytes[from + rng() % (to - from)] = static_cast<uint8_t>(rng());
    }
    auto module = NativeModule::LoadFromMemory(bytes.data(), bytes.size(), {"", "", false, false});
    if (!module.ok()) continue;
    EhFrameReader reader(**module);
    for (size_t i = 0; i < addresses.size(); ++i) {
      FrameRule rule = reader.RuleFor(addresses[i]);
      reader.FindFde(addresses[i]);
      if (truncate && rule.simple) {
        EXPECT_EQ(rule, truth[i]) << "round " << round << std::hex << " at 0x" << addresses[i];
      }
    }
  }
}

}  // namespace
}  // namespace ebpf
