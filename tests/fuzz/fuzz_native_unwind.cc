// Fuzz target: native unwinding and symbolization (NativeUnwinder, its
// libunwind accessors, the per-process state, the module and name caches)
// over arbitrary stack bytes and registers, against a real process's
// mappings: this process's own, live (/proc/self, process_vm_readv) or
// replayed as a recording (its maps text, the host's files), plus a recording
// whose maps text has fuzzed lines appended, and a pid that does not exist.
//
// Addresses in the input are relative to this process's executable mappings
// (sorted by file name, so an input means much the same in the libFuzzer and
// the g++ build) and to the stack pointer, then relocated: an input stays
// meaningful across runs despite ASLR.
//
// Input layout (missing bytes read as zero):
//   u8  flags     bits 0-1 target: 0 live self, 1 recording of self,
//                             2 recording + fuzzed maps lines, 3 missing pid
//                 bit 2 the second unwinder (insert_dso_name, max_depth 8,
//                       tiny caches); bit 3 with bit 2: from scratch
//                 bit 4 cache_eviction() after; bit 5 ip is absolute
//                 bit 6 a process_key follows; bit 7 ForgetProcess first
//   ip            bit 5: u64; else u8 mapping index, u32 offset into it
//   u16 sp        sp = kStackBase + 16 * value
//   u16 bp        0: bp = 0; else bp = sp + 8 * (value - 1)
//   [u64 process_key]
//   [u16 n, n bytes of maps lines]   (target 2)
//   u16 relocations, each u16 word index + u8 base (0xff: sp, else a mapping)
//   rest          the stack copy (at most 60 KiB, as BPF copies 15 pages)
//
// Checks: the unwinder never crashes or reads out of bounds (ASan/UBSan), its
// frames stay within max_depth (+1 marker), names are printable UTF-8, and
// the frames spelled into a collapsed line pass CheckProfileOutput.
//
// PYPERF_FUZZ_WRITE_SEED=FILE writes a seed made from this process's own
// stack (a real unwind) to FILE at start-up.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "FrameSpelling.h"
#include "SampleAssembler.h"
#include "fuzz_support.h"
#include "native_unwinder.h"
#include "proc_maps.h"
#include "read_file.h"
#include "utf8.h"

namespace {

using pyperf_fuzz::FuzzInput;

constexpr uint64_t kStackBase = 0x7ffd00000000;
constexpr size_t kMaxStack = 15 * 4096;
constexpr pid_t kRecordedPid = 0x7ff00001;       // self's maps, replayed
constexpr pid_t kRecordedExtraPid = 0x7ff00002;  // self's maps + fuzzed lines
constexpr pid_t kMissingPid = 0x7ff00003;        // no such process

struct ExecMapping {
  uint64_t start, end;
  std::string sort_key;
};

struct State {
  std::string maps_text;
  std::vector<ExecMapping> mappings;  // executable file and vDSO mappings
  std::unique_ptr<ebpf::NativeUnwinder> main;
  std::unique_ptr<ebpf::NativeUnwinder> small;
  std::vector<ebpf::NativeFrame> frames;
};

State& TheState() {
  static State* state = [] {
    auto* s = new State;  // lives for the whole run
    if (int err = ebpf::ReadFileInto("/proc/self/maps", &s->maps_text); err != 0)
      pyperf_fuzz::Fail("cannot read /proc/self/maps");
    auto parsed = ebpf::ParseProcMaps(s->maps_text);
    if (!parsed.ok()) pyperf_fuzz::Fail("cannot parse /proc/self/maps: " + parsed.error());
    for (const auto& m : *parsed) {
      if (!m.executable() || !(m.is_file() || m.path == "[vdso]")) continue;
      size_t slash = m.path.rfind('/');
      std::string base = slash == std::string::npos ? m.path : m.path.substr(slash + 1);
      char off[32];
      std::snprintf(off, sizeof(off), "@%016llx", static_cast<unsigned long long>(m.offset));
      s->mappings.push_back({m.start, m.end, base + off});
    }
    if (s->mappings.empty()) pyperf_fuzz::Fail("no executable mappings in /proc/self/maps");
    std::sort(s->mappings.begin(), s->mappings.end(),
              [](const ExecMapping& a, const ExecMapping& b) { return a.sort_key < b.sort_key; });

    ebpf::NativeUnwinderOptions main_options;
    main_options.stop_symbols = {"_PyEval_EvalFrameDefault", "PyEval_EvalFrameEx", "main",
                                 "LLVMFuzzerTestOneInput"};
    s->main = std::make_unique<ebpf::NativeUnwinder>(main_options);
    ebpf::NativeUnwinderOptions small_options;
    small_options.insert_dso_name = true;
    small_options.max_depth = 8;
    small_options.name_cache_limits.max_entries = 64;
    small_options.name_cache_limits.max_bytes = 4096;
    small_options.name_cache_limits.max_age_rounds = 2;
    small_options.module_cache_limits.max_entries = 3;
    small_options.module_cache_limits.max_age_rounds = 2;
    small_options.process_max_age_rounds = 2;
    s->small = std::make_unique<ebpf::NativeUnwinder>(small_options);
    for (auto* u : {s->main.get(), s->small.get()}) {
      ebpf::Status st = u->AddRecordedProcess(kRecordedPid, s->maps_text, "");
      if (!st.ok()) pyperf_fuzz::Fail("AddRecordedProcess: " + st.message());
    }
    return s;
  }();
  return *state;
}

void Put16(std::string* out, uint16_t v) { out->append(reinterpret_cast<const char*>(&v), 2); }
void Put32(std::string* out, uint32_t v) { out->append(reinterpret_cast<const char*>(&v), 4); }

// A seed from this process's real stack: the registers here, the stack above
// them, every word that points into an executable mapping or into the copy
// written relative to it with a relocation.
__attribute__((noinline)) void WriteOwnStackSeed(const char* path) {
  State& s = TheState();
  uint64_t ip, sp, bp;
  asm volatile("lea 0(%%rip), %0" : "=r"(ip));
  asm volatile("mov %%rsp, %0" : "=r"(sp));
  asm volatile("mov %%rbp, %0" : "=r"(bp));
  // The copy ends at the top of the stack mapping.
  uint64_t stack_end = sp;
  auto parsed = ebpf::ParseProcMaps(s.maps_text);
  if (parsed.ok()) {
    for (const auto& m : *parsed)
      if (sp >= m.start && sp < m.end) stack_end = m.end;
  }
  size_t len = std::min<uint64_t>(stack_end - sp, 16 * 1024) & ~uint64_t{7};
  std::vector<uint64_t> words(len / 8);
  std::memcpy(words.data(), reinterpret_cast<const void*>(sp), len);
  std::string relocs;
  uint16_t nrelocs = 0;
  for (size_t i = 0; i < words.size() && i < 0xffff && nrelocs < 0xffff; ++i) {
    uint64_t w = words[i];
    if (w >= sp && w < sp + len) {
      words[i] = w - sp;
      Put16(&relocs, static_cast<uint16_t>(i));
      relocs.push_back(static_cast<char>(0xff));
      ++nrelocs;
      continue;
    }
    for (size_t k = 0; k < s.mappings.size() && k < 0xff; ++k) {
      if (w >= s.mappings[k].start && w < s.mappings[k].end) {
        words[i] = w - s.mappings[k].start;
        Put16(&relocs, static_cast<uint16_t>(i));
        relocs.push_back(static_cast<char>(k));
        ++nrelocs;
        break;
      }
    }
  }
  size_t ip_index = 0;
  for (size_t k = 0; k < s.mappings.size(); ++k)
    if (ip >= s.mappings[k].start && ip < s.mappings[k].end) ip_index = k;
  std::string seed;
  seed.push_back(static_cast<char>(1));  // a recording of self, main unwinder
  seed.push_back(static_cast<char>(ip_index));
  Put32(&seed, static_cast<uint32_t>(ip - s.mappings[ip_index].start));
  Put16(&seed, 0);  // sp = kStackBase
  uint64_t bp_words = bp >= sp && bp < sp + len ? (bp - sp) / 8 + 1 : 0;
  Put16(&seed, static_cast<uint16_t>(bp_words));
  Put16(&seed, nrelocs);
  seed += relocs;
  seed.append(reinterpret_cast<const char*>(words.data()), words.size() * 8);
  std::ofstream(path, std::ios::binary) << seed;
  std::fprintf(stderr, "wrote a %zu-byte seed from this process's stack to %s\n", seed.size(),
               path);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  TheState();
  if (const char* path = std::getenv("PYPERF_FUZZ_WRITE_SEED")) WriteOwnStackSeed(path);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  State& s = TheState();
  FuzzInput in(data, size);
  const uint8_t flags = in.U8();
  const int target = flags & 3;
  const bool use_small = flags & 4;
  const bool from_scratch = use_small && (flags & 8);
  ebpf::NativeUnwinder& unwinder = use_small ? *s.small : *s.main;

  ebpf::NativeSnapshot snap;
  if (flags & 0x20) {
    snap.ip = in.U64();
  } else {
    const ExecMapping& m = s.mappings[in.U8() % s.mappings.size()];
    // Mostly inside the mapping, sometimes a little past its end.
    snap.ip = m.start + in.U32() % (m.end - m.start + 4096);
  }
  snap.sp = kStackBase + 16 * static_cast<uint64_t>(in.U16());
  uint16_t bp = in.U16();
  snap.bp = bp == 0 ? 0 : snap.sp + 8 * static_cast<uint64_t>(bp - 1);
  if (flags & 0x40) snap.process_key = in.U64();

  switch (target) {
    case 0:
      snap.pid = getpid();
      break;
    case 1:
      snap.pid = kRecordedPid;
      break;
    case 2: {
      std::string_view extra = in.Bytes(in.U16());
      ebpf::Status st =
          unwinder.AddRecordedProcess(kRecordedExtraPid, s.maps_text + std::string(extra), "");
      PYPERF_FUZZ_CHECK(st.ok(), st.message());
      snap.pid = kRecordedExtraPid;
      break;
    }
    default:
      snap.pid = kMissingPid;
      break;
  }
  if (flags & 0x80) unwinder.ForgetProcess(snap.pid);

  struct Reloc {
    uint16_t word;
    uint8_t base;
  };
  std::vector<Reloc> relocs(in.U16());
  for (Reloc& r : relocs) {
    r.word = in.U16();
    r.base = in.U8();
  }
  std::string_view stack_bytes = in.Bytes(kMaxStack);
  std::vector<uint64_t> stack((stack_bytes.size() + 7) / 8);
  if (!stack_bytes.empty()) std::memcpy(stack.data(), stack_bytes.data(), stack_bytes.size());
  for (const Reloc& r : relocs) {
    if (r.word >= stack.size()) continue;
    stack[r.word] += r.base == 0xff ? snap.sp : s.mappings[r.base % s.mappings.size()].start;
  }
  snap.stack = reinterpret_cast<const uint8_t*>(stack.data());
  snap.stack_len = stack_bytes.size();

  unwinder.set_cache_enabled(!from_scratch);
  ebpf::NativeUnwindResult result = unwinder.Unwind(snap, &s.frames);
  unwinder.set_cache_enabled(true);

  const size_t max_depth = unwinder.options().max_depth;
  PYPERF_FUZZ_CHECK(
      s.frames.size() <= max_depth + 1,
      std::to_string(s.frames.size()) + " frames, max_depth " + std::to_string(max_depth));
  bool any_error = false;
  for (const ebpf::NativeFrame& f : s.frames) {
    PYPERF_FUZZ_CHECK(ebpf::IsPrintableUtf8(f.name), "frame name: " + f.name);
    PYPERF_FUZZ_CHECK(!f.name.empty(), "an empty frame name");
    any_error |= f.error;
  }
  PYPERF_FUZZ_CHECK(any_error == result.error, "error flag and marker frames disagree");

  // As a sample's frames, spelled into a collapsed line.
  ebpf::pyperf::FrameDictionary dictionary;
  ebpf::pyperf::Sample sample;
  sample.pid = sample.tid = 1;
  sample.comm = dictionary.Intern("fuzz");
  ebpf::pyperf::AppendNativeSampleFrames(s.frames, result, &unwinder, &dictionary, &sample.frames);
  std::string text;
  ebpf::pyperf::StackSpeller(dictionary).AppendCollapsedStack(sample, &text);
  pyperf_fuzz::CheckProfileOutput(text + " 1\n");
  if (pyperf_fuzz::Verbose()) std::fprintf(stderr, "%s\n", text.c_str());

  if (flags & 0x10) unwinder.cache_eviction();
  if (target == 2) unwinder.ForgetProcess(kRecordedExtraPid);
  return 0;
}
