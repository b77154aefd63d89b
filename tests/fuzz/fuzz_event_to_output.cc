// Fuzz target: arbitrary BPF event records -> collapsed output lines, through
// the code PyPerf runs for each event: the record size check and aligned copy
// (PyPerfBpf::HandleEvent), then PyPerf's own SampleAssembler (process
// replaced, truncation and sample-error markers, Python frames, native frames,
// kernel frames) with PythonSymbolTable resolving ids to symbols read from a
// fake symbols map whose raw bytes (strings of every encoding, any sizes) come
// from the input, PythonStackDecoder with --line-numbers first and current
// (a fake code object in this process, whose line table comes from the input,
// read with process_vm_readv at a real CPython layout's offsets),
// NativeStackTrace over the event's registers and stack copy against this
// process, kernel stacks from a fake stack map; and ProfileOutput's counting
// and dump; then the flamegraph, speedscope and pprof encoders over the same
// samples.
//
// The BPF program is not loaded: the kernel stacks come from the input, and
// every event is made to name this process (PyPerf drops events of pids it
// does not track before assembling anything), as PyPerfProfiler::OnEvent
// hands it over.
//
// Input layout (missing bytes read as zero):
//   u8  flags     bit 0 --line-numbers current; bit 1 unused (native
//                 frames are always on: NativeStackTrace is process-wide)
//                 bit 2 kernel addresses named (else printed as hex)
//                 bit 3 end a symbol round after each event
//                 bit 4 --native-frames interleaved (the event's entries and
//                 its native frames merged by StackInterleaver)
//                 bit 5 --async-tasks (the event's task chain before its
//                 Python frames)
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
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "FrameSpelling.h"
#include "NativeStackTrace.h"
#include "ProfileEncoders.h"
#include "ProfileOutput.h"
#include "PyOffsets.h"
#include "PyPerfBpfShared.h"
#include "PythonStackDecoder.h"
#include "PythonSymbols.h"
#include "SampleAssembler.h"
#include "TrackedProcess.h"
#include "fuzz_support.h"
#include "kallsyms.h"
#include "support/collapsed.h"

namespace {

using pyperf_fuzz::FuzzInput;

const ebpf::pyperf::PythonVersion kVersions[] = {{2, 7, 18}, {3, 6, 15},  {3, 7, 17}, {3, 8, 18},
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
  ebpf::KernelSymbols kallsyms;
  ebpf::KernelSymbols no_kallsyms;  // kernel frames printed as addresses
};

State& TheState() {
  static State* state = [] {
    auto* s = new State;  // lives for the whole run, as NativeStackTrace's caches
    ebpf::NativeUnwinderOptions native;
    native.stop_symbols = {"_PyEval_EvalFrameDefault", "PyEval_EvalFrameEx"};
    ebpf::pyperf::NativeStackTrace::Configure(native);
    auto ksyms = ebpf::KernelSymbols::Parse(kKallsyms);
    if (!ksyms.ok()) pyperf_fuzz::Fail("kallsyms: " + ksyms.error());
    s->kallsyms = std::move(*ksyms);
    return s;
  }();
  return *state;
}

// The symbol table over a fake BPF symbols map, new for each input so that
// each input stands alone.
std::unique_ptr<ebpf::pyperf::PythonSymbolTable> MakeSymbolTable(
    std::map<int32_t, pyperf_symbol>* symbols_map) {
  ebpf::pyperf::PythonSymbolTable::Maps maps;
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
  ebpf::pyperf::PythonSymbolTable::Limits limits;
  limits.capacity = 64;
  limits.max_idle_rounds = 4;
  return std::make_unique<ebpf::pyperf::PythonSymbolTable>(std::move(maps), limits);
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

// The stack map, from the input: generation 0 is the current one.
class FakeKernelStacks final : public ebpf::pyperf::KernelStackSource {
 public:
  std::map<int32_t, std::vector<uint64_t>> stacks;
  bool Read(uint32_t generation, int32_t stack_id, std::vector<uint64_t>* out) override {
    auto it = stacks.find(stack_id);
    if (stack_id < 0 || 0u - generation > 1 || it == stacks.end()) return false;
    *out = it->second;
    return true;
  }
};

}  // namespace

namespace {

// The other --format encoders on the same samples: each writes its whole
// file without an error, the text formats in strict UTF-8, pprof gzip'd.
void CheckOtherFormats(const std::deque<ebpf::pyperf::Sample>& samples,
                       const ebpf::pyperf::FrameDictionary& dictionary) {
  ebpf::pyperf::DumpedProfile profile;
  for (const ebpf::pyperf::Sample& sample : samples) profile.stacks.push_back({&sample, 1});
  profile.dictionary = &dictionary;
  profile.sample_period_ns = 1000000;
  for (ebpf::pyperf::ProfileFormat format :
       {ebpf::pyperf::ProfileFormat::kFlameGraph, ebpf::pyperf::ProfileFormat::kSpeedscope,
        ebpf::pyperf::ProfileFormat::kPprof}) {
    char* text = nullptr;
    size_t size = 0;
    std::FILE* out = open_memstream(&text, &size);
    PYPERF_FUZZ_CHECK(out != nullptr, "open_memstream failed");
    const bool written = ebpf::pyperf::MakeProfileEncoder(format)->Write(profile, out);
    std::fclose(out);
    std::string file(text, size);
    std::free(text);
    const std::string name(ebpf::pyperf::ProfileFormatName(format));
    PYPERF_FUZZ_CHECK(written, name + " encoder failed");
    if (format == ebpf::pyperf::ProfileFormat::kPprof) {
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
  bool interleaved = false;
  bool async_tasks = false;

  static RunFlags From(uint8_t byte) {
    RunFlags f;
    f.current_lines = byte & 1;
    f.native_on = byte & 2;
    f.kernel_names = byte & 4;
    f.end_rounds = byte & 8;
    f.interleaved = byte & 16;
    f.async_tasks = byte & 32;
    return f;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  State& s = TheState();
  FuzzInput in(data, size);
  const RunFlags run = RunFlags::From(in.U8());
  const ebpf::pyperf::PythonVersion version =
      kVersions[in.U8() % (sizeof(kVersions) / sizeof(kVersions[0]))];

  std::map<int32_t, pyperf_symbol> symbols_map;
  for (int n = in.U8(); n > 0; --n) {
    int32_t id = in.Take<int32_t>();
    symbols_map[id] = in.Take<pyperf_symbol>();
  }
  auto symbols = MakeSymbolTable(&symbols_map);
  ebpf::pyperf::PythonStackDecoder python(symbols.get(), run.current_lines);
  const pyperf_offsets* offsets = ebpf::pyperf::FindOffsets(version);
  PYPERF_FUZZ_CHECK(offsets != nullptr, "no offsets for " + version.ToString());
  SetUpCodeObject(*offsets, in.Bytes(in.U16() % 4096));

  FakeKernelStacks kernel_stacks;
  for (int n = in.U8(); n > 0; --n) {
    auto& addrs = kernel_stacks.stacks[in.Take<int32_t>()];
    for (int k = in.U8(); k > 0; --k) addrs.push_back(in.U64());
  }
  ebpf::pyperf::SampleAssembler assembler(&python, &kernel_stacks,
                                          run.kernel_names ? &s.kallsyms : &s.no_kallsyms);
  assembler.set_interleaved(run.interleaved);
  assembler.set_async_tasks(run.async_tasks);

  ebpf::pyperf::TrackedProcess tracked;
  tracked.pid = getpid();
  tracked.version = version;
  tracked.offsets = offsets;

  char* out_text = nullptr;
  size_t out_size = 0;
  std::FILE* stream = open_memstream(&out_text, &out_size);
  PYPERF_FUZZ_CHECK(stream != nullptr, "open_memstream failed");
  uint64_t printed = 0;
  // Every sample, for the other formats (before the dump empties the
  // output's dictionary, which their ids are of).
  std::deque<ebpf::pyperf::Sample> all_samples;
  {
    ebpf::pyperf::ProfileOutput output("", stream);
    PYPERF_FUZZ_CHECK(output.Start().ok(), "ProfileOutput::Start");
    ebpf::pyperf::Sample sample;

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
      // A frame whose code is 1 names the fake code object (BPF sends the
      // real address; no input can know this process's).
      for (pyperf_frame& f : event.frames) {
        if (f.code == 1) f.code = reinterpret_cast<uint64_t>(static_cast<void*>(g_code));
      }
      // PyPerfProfiler::OnEvent forgets a replaced process before assembling.
      if (event.replaced) assembler.ForgetProcess(tracked.pid);
      assembler.Assemble(event, event_size, tracked, &output.dictionary(), &sample);
      PYPERF_FUZZ_CHECK(!sample.frames.empty(), "a sample without frames");
      output.Add(sample);
      ++printed;
      all_samples.push_back(sample);

      if (run.end_rounds) {
        symbols->EndRound();
        symbols->AfterFullDrain();
        python.EndRound();
        ebpf::pyperf::NativeStackTrace::cache_eviction();
      }
    }

    CheckOtherFormats(all_samples, output.dictionary());
    const size_t stacks = output.pending_stacks();
    auto dumped = output.Dump();
    PYPERF_FUZZ_CHECK(dumped.ok(), dumped.error());
    PYPERF_FUZZ_CHECK(
        dumped->samples == printed,
        std::to_string(dumped->samples) + " samples dumped of " + std::to_string(printed));
    PYPERF_FUZZ_CHECK(dumped->lines == stacks, "lines dumped != distinct samples");
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

  // Each input stands alone: the native unwinder forgets this process.
  ebpf::pyperf::NativeStackTrace::ForgetProcess(tracked.pid);
  return 0;
}
