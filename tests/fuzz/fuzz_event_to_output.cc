// Fuzz target: arbitrary BPF event records -> collapsed output lines, through
// the code PyPerf runs for each event: the record size check and aligned copy
// (PyPerfBpf::HandleEvent), the steps of PyPerfProfiler::OnEvent (process
// replaced, truncation and sample-error markers, Python frames, native frames,
// kernel frames), PythonSymbolTable resolving ids to symbols read from a fake
// symbols map whose raw bytes (strings of every encoding, any sizes) come
// from the input, PythonStackDecoder with --line-numbers first and current
// (a fake code object in this process, whose line table comes from the input,
// read with process_vm_readv at a real CPython layout's offsets),
// NativeUnwinder over the event's registers and stack copy against this
// process, StackText, and ProfileOutput's aggregation and dump; then the
// flamegraph, speedscope and pprof encoders over the same stacks.
//
// OnEvent itself needs a loaded BPF program, so its steps are repeated here in
// its order; the functions it calls are PyPerf's own. Every event is made to
// name this process (PyPerf drops events of pids it does not track before
// printing anything).
//
// Input layout (missing bytes read as zero):
//   u8  flags     bit 0 --line-numbers current; bit 1 native frames
//                 bit 2 kernel addresses named (else printed as hex)
//                 bit 3 end a symbol round after each event
//   u8  version   picks the CPython layout (line-table format, offsets)
//   u8  n         symbols: each i32 id, then a raw pyperf_symbol
//   u16 n         line table bytes of the fake code object
//   u8  n         kernel stacks: each i32 id, u8 count, count x u64 address
//   then records until the input ends: u16 size, then that many bytes
//                 (a frame's code 1 stands for the fake code object)
//
// Checks: nothing crashes or reads out of bounds (ASan/UBSan), and the dump
// is strict UTF-8 that gProfiler's parser reads whole, one line per distinct
// stack, with as many samples as events printed.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "EventNativeSnapshot.h"
#include "FrameSpelling.h"
#include "ProfileOutput.h"
#include "PyOffsets.h"
#include "PyPerfBpfShared.h"
#include "PythonStackDecoder.h"
#include "PythonSymbols.h"
#include "TrackedProcess.h"
#include "fuzz_support.h"
#include "kallsyms.h"
#include "native_unwinder.h"
#include "support/collapsed.h"

namespace {

using pyperf_fuzz::FuzzInput;

constexpr int32_t kNoKernelStack = -14;  // -EFAULT, as PyPerfProfiler reads it

const pyperf::PythonVersion kVersions[] = {{2, 7, 18}, {3, 6, 15},  {3, 7, 17}, {3, 8, 18},
                                           {3, 9, 18}, {3, 10, 13}, {3, 11, 7}, {3, 12, 1},
                                           {3, 13, 5}, {3, 14, 0}};

// A few kernel symbols: kernel names are not what is fuzzed here.
constexpr char kKallsyms[] =
    "ffffffff81000000 T _stext\n"
    "ffffffff81001000 T do_syscall_64\n"
    "ffffffff81002000 t read_zero\n"
    "ffffffff81003000 T entry_SYSCALL_64_after_hwframe\n"
    "ffffffffc0000000 t mod_func\t[some_module]\n";

// The fake code object and its line table (a bytes object), in this
// process's memory, laid out at the chosen version's offsets.
alignas(16) uint8_t g_code[4096];
alignas(16) uint8_t g_table[4096 + 1024];

struct State {
  std::unique_ptr<pyperf::NativeUnwinder> native;
  std::vector<pyperf::NativeFrame> native_frames;
  pyperf::KernelSymbols kallsyms;
  pyperf::StackText scratch;
};

State& TheState() {
  static State* state = [] {
    auto* s = new State;  // lives for the whole run
    pyperf::NativeUnwinderOptions native;
    native.stop_symbols = {"_PyEval_EvalFrameDefault", "PyEval_EvalFrameEx"};
    s->native = std::make_unique<pyperf::NativeUnwinder>(native);
    auto ksyms = pyperf::KernelSymbols::Parse(kKallsyms);
    if (!ksyms.ok()) pyperf_fuzz::Fail("kallsyms: " + ksyms.error());
    s->kallsyms = std::move(*ksyms);
    return s;
  }();
  return *state;
}

// The symbol table over a fake BPF symbols map, new for each input so that
// each input stands alone.
std::unique_ptr<pyperf::PythonSymbolTable> MakeSymbolTable(
    std::map<int32_t, pyperf_symbol>* symbols_map) {
  pyperf::PythonSymbolTable::Maps maps;
  maps.lookup = [symbols_map](int32_t id) -> std::optional<pyperf_symbol> {
    auto it = symbols_map->find(id);
    if (it == symbols_map->end()) return std::nullopt;
    return it->second;
  };
  maps.retire = [symbols_map](int32_t id) { return symbols_map->erase(id) > 0; };
  maps.interned = [symbols_map] {
    return std::optional<std::vector<uint64_t>>(std::vector<uint64_t>{symbols_map->size()});
  };
  maps.ids = [symbols_map] {
    std::vector<int32_t> ids;
    for (const auto& entry : *symbols_map) ids.push_back(entry.first);
    return ids;
  };
  pyperf::PythonSymbolTable::Limits limits;
  limits.capacity = 64;
  limits.max_idle_rounds = 4;
  return std::make_unique<pyperf::PythonSymbolTable>(std::move(maps), limits);
}

template <typename T>
void Store(uint8_t* base, size_t size, int64_t offset, T value) {
  if (offset < 0 || static_cast<uint64_t>(offset) + sizeof(T) > size) return;
  std::memcpy(base + offset, &value, sizeof(T));
}

// Lays the fake code object out for `o`, its line table holding `table`.
void SetUpCodeObject(const pyperf_offsets& o, std::string_view table) {
  std::memset(g_code, 0, sizeof(g_code));
  std::memset(g_table, 0, sizeof(g_table));
  Store<uint64_t>(g_code, sizeof(g_code), o.code_linetable,
                  reinterpret_cast<uint64_t>(static_cast<void*>(g_table)));
  Store<int64_t>(g_table, sizeof(g_table), o.var_object_size, static_cast<int64_t>(table.size()));
  if (o.bytes_data >= 0 && static_cast<uint64_t>(o.bytes_data) + table.size() <= sizeof(g_table))
    std::memcpy(g_table + o.bytes_data, table.data(), table.size());
}

}  // namespace

namespace {

// The other --format encoders on the same stacks: each writes its whole
// file without an error, the text formats in strict UTF-8, pprof gzip'd.
void CheckOtherFormats(const std::map<std::string, uint64_t>& stacks) {
  pyperf::DumpedProfile profile;
  for (const auto& [stack, count] : stacks) profile.stacks.emplace_back(stack, count);
  profile.sample_period_ns = 1000000;
  std::unordered_map<std::string, pyperf::NativeFrameOrigin> origins;
  profile.native_origins = &origins;
  for (pyperf::ProfileFormat format :
       {pyperf::ProfileFormat::kFlameGraph, pyperf::ProfileFormat::kSpeedscope,
        pyperf::ProfileFormat::kPprof}) {
    char* text = nullptr;
    size_t size = 0;
    std::FILE* out = open_memstream(&text, &size);
    PYPERF_FUZZ_CHECK(out != nullptr, "open_memstream failed");
    const bool written = pyperf::MakeProfileEncoder(format)->Write(profile, out);
    std::fclose(out);
    std::string file(text, size);
    std::free(text);
    const std::string name(pyperf::ProfileFormatName(format));
    PYPERF_FUZZ_CHECK(written, name + " encoder failed");
    if (format == pyperf::ProfileFormat::kPprof) {
      PYPERF_FUZZ_CHECK(file.size() > 2 && file[0] == '\x1f' && file[1] == '\x8b',
                        "the pprof file is not gzip'd");
    } else {
      PYPERF_FUZZ_CHECK(!pyperf_test::FirstNonUtf8Byte(file).has_value(),
                        "the " + name + " file is not strict UTF-8");
    }
  }
}

// The input's flags byte (see the layout above).
struct RunFlags {
  bool current_lines = false;
  bool native_on = false;
  bool kernel_names = false;
  bool end_rounds = false;

  static RunFlags From(uint8_t byte) {
    RunFlags f;
    f.current_lines = byte & 1;
    f.native_on = byte & 2;
    f.kernel_names = byte & 4;
    f.end_rounds = byte & 8;
    return f;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  State& s = TheState();
  FuzzInput in(data, size);
  const RunFlags run = RunFlags::From(in.U8());
  const pyperf::PythonVersion version =
      kVersions[in.U8() % (sizeof(kVersions) / sizeof(kVersions[0]))];

  std::map<int32_t, pyperf_symbol> symbols_map;
  for (int n = in.U8(); n > 0; --n) {
    int32_t id = in.Take<int32_t>();
    symbols_map[id] = in.Take<pyperf_symbol>();
  }
  auto symbols = MakeSymbolTable(&symbols_map);
  pyperf::PythonStackDecoder python(symbols.get(), run.current_lines);
  const pyperf_offsets* offsets = pyperf::FindOffsets(version);
  PYPERF_FUZZ_CHECK(offsets != nullptr, "no offsets for " + version.ToString());
  SetUpCodeObject(*offsets, in.Bytes(in.U16() % 4096));

  std::map<int32_t, std::vector<uint64_t>> kernel_stacks;  // the fake stack map
  for (int n = in.U8(); n > 0; --n) {
    auto& addrs = kernel_stacks[in.Take<int32_t>()];
    for (int k = in.U8(); k > 0; --k) addrs.push_back(in.U64());
  }
  const uint32_t kernel_stack_generation = 0;

  pyperf::TrackedProcess tracked;
  tracked.pid = getpid();
  tracked.version = version;
  tracked.offsets = offsets;

  char* out_text = nullptr;
  size_t out_size = 0;
  std::FILE* stream = open_memstream(&out_text, &out_size);
  PYPERF_FUZZ_CHECK(stream != nullptr, "open_memstream failed");
  uint64_t printed = 0;
  std::map<std::string, uint64_t> all_stacks;  // what the other formats are given
  {
    pyperf::ProfileOutput output("", stream);
    PYPERF_FUZZ_CHECK(output.Start().ok(), "ProfileOutput::Start");
    uint64_t symbol_errors = 0;

    while (!in.empty()) {
      std::string_view record = in.Bytes(in.U16());
      // PyPerfBpf::HandleEvent: too short for the fixed part -> dropped; else
      // an 8-byte aligned copy of exactly the record.
      if (record.size() < offsetof(pyperf_event, user_stack)) continue;
      std::vector<uint64_t> aligned((record.size() + 7) / 8);
      std::memcpy(aligned.data(), record.data(), record.size());
      auto& event = *reinterpret_cast<pyperf_event*>(aligned.data());
      const size_t event_size = record.size();
      // Only events of tracked processes get this far; a user task never has
      // tid 0.
      event.pid = static_cast<uint32_t>(tracked.pid);
      if (event.tid == 0) continue;

      pyperf::StackText& st = s.scratch;
      st.Start(event.comm, sizeof(event.comm), event.pid, event.tid);

      auto append_native = [&] {
        if (!run.native_on) return;
        pyperf::NativeSnapshot snapshot = pyperf::NativeSnapshotOf(event, event_size);
        pyperf::NativeUnwindResult result = s.native->Unwind(snapshot, &s.native_frames);
        st.AddNativeFrames(s.native_frames, result);
      };
      auto append_kernel = [&] {
        const int32_t stack_id = event.kernel_stack_id;
        if (stack_id == kNoKernelStack) return;
        auto it = kernel_stacks.find(stack_id);
        if (stack_id < 0 || kernel_stack_generation - event.kernel_stack_generation > 1 ||
            it == kernel_stacks.end()) {
          st.AddMarker(pyperf::kLostKernelStack);
          return;
        }
        for (auto a = it->second.rbegin(); a != it->second.rend(); ++a) {
          std::optional<std::string_view> name;
          if (run.kernel_names) name = s.kallsyms.Lookup(*a);
          if (name) {
            st.Add(pyperf::FrameKind::kKernel, *name);
          } else {
            st.AddKernelAddress(*a);
          }
        }
      };

      if (event.replaced) {
        python.ForgetProcess(tracked.pid);
        s.native->ForgetProcess(tracked.pid);
        st.AddMarker(pyperf::kProcessReplaced);
        append_native();
        append_kernel();
        output.Add(st.text());
        ++all_stacks[st.text()];
        ++printed;
        continue;
      }
      if (event.truncated) st.AddMarker(pyperf::kTruncatedPythonStack);
      if (event.error != PYPERF_ERROR_NONE) st.AddSampleError(event.error);
      // A frame whose code is 1 names the fake code object (BPF sends the
      // real address; no input can know this process's).
      for (pyperf_frame& f : event.frames) {
        if (f.code == 1) f.code = reinterpret_cast<uint64_t>(static_cast<void*>(g_code));
      }
      python.AppendFrames(event, tracked, &st, &symbol_errors);
      append_native();
      append_kernel();
      st.EnsureFrame();
      output.Add(st.text());
      ++all_stacks[st.text()];
      ++printed;
      pyperf_fuzz::CheckProfileOutput(st.text() + " 1");

      if (run.end_rounds) {
        symbols->EndRound();
        symbols->AfterFullDrain();
        python.EndRound();
        s.native->cache_eviction();
      }
    }

    const size_t stacks = output.pending_stacks();
    auto dumped = output.Dump();
    PYPERF_FUZZ_CHECK(dumped.ok(), dumped.error());
    PYPERF_FUZZ_CHECK(
        dumped->samples == printed,
        std::to_string(dumped->samples) + " samples dumped of " + std::to_string(printed));
    PYPERF_FUZZ_CHECK(dumped->lines == stacks, "lines dumped != distinct stacks");
  }
  std::fclose(stream);
  std::string text(out_text, out_size);
  std::free(out_text);
  pyperf_fuzz::CheckProfileOutput(text);
  if (pyperf_fuzz::Verbose()) std::fprintf(stderr, "%s", text.c_str());
  uint64_t counted = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    std::string line = text.substr(start, end - start);
    start = end == std::string::npos ? text.size() : end + 1;
    if (line.empty()) continue;
    auto parsed = pyperf_test::ParseCollapsedLine(line, nullptr);
    counted += parsed->count;
    PYPERF_FUZZ_CHECK(parsed->pid == getpid(), "the line names pid " + std::to_string(parsed->pid));
  }
  PYPERF_FUZZ_CHECK(counted == printed, "the dump counts " + std::to_string(counted) +
                                            " samples, " + std::to_string(printed) + " printed");

  CheckOtherFormats(all_stacks);

  // Each input stands alone: the native unwinder forgets this process.
  s.native->ForgetProcess(tracked.pid);
  return 0;
}
