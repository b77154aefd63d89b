// PyPerfBpf: see PyPerfBpf.h.
#include "PyPerfBpf.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/perf_event.h>

#include <algorithm>
#include <cstring>

#include "bpf_loader.h"
#include "perf_event.h"

namespace ebpf::pyperf {

// Generated from PyPerfBpfShared.h, PyPerfBPFProgram.c, PythonSymbolProgram.c,
// PythonStackWalkProgram.c and KernelOffsetCheckProgram.c (cmake/EmbedFiles.cmake).
const std::vector<std::pair<std::string, std::string>>& EmbeddedBpfProgram();

namespace {
constexpr int kFramesPerProg = 16;
constexpr int kThreadsPerProg = 64;
constexpr int kMaxThreadWalks = 16;  // 1024 thread states at most per lookup
constexpr char kCheckProgram[] = "check_kernel_offsets";
// Between two reads of the check's results the thread stays in user mode.
constexpr auto kCheckSpin = std::chrono::microseconds(100);

// The keys of a map keyed by int32 into *keys (replaced), by a walk.
void ReadInt32Keys(int map_fd, std::vector<int32_t>* keys) {
  keys->clear();
  int32_t key = 0, next = 0;
  for (const void* from = nullptr; bpf_map_get_next_key(map_fd, from, &next) == 0; from = &key) {
    keys->push_back(next);
    key = next;
  }
}

uint64_t NextPowerOfTwoMask(uint64_t n) {
  uint64_t p = 1;
  while (p < n) p <<= 1;
  return p - 1;
}
}  // namespace

std::string PyPerfBpfProgramText() {
  std::string header, program, python_symbols, python_walk, python_tasks, check;
  for (const auto& [name, text] : EmbeddedBpfProgram()) {
    if (name == "PyPerfBpfShared.h")
      header = text;
    else if (name == "PythonSymbolProgram.c")
      python_symbols = text;
    else if (name == "PythonStackWalkProgram.c")
      python_walk = text;
    else if (name == "PythonTaskProgram.c")
      python_tasks = text;
    else if (name == "KernelOffsetCheckProgram.c")
      check = text;
    else
      program = text;
  }
  // The shared header goes first; the program's own #include of the perf
  // context header comes from the kernel-header shim. The Python symbols, the
  // walk that names frames with them and the start-up check use the program's
  // maps and helpers, so they follow it, in that order; the task walk uses
  // the symbols' naming and comes after the frame walk.
  return "#include <uapi/linux/bpf_perf_event.h>\n" + header + "\n" + program + "\n" +
         python_symbols + "\n" + python_walk + "\n" + python_tasks + "\n" + check;
}

Result<std::unique_ptr<PyPerfBpf>> PyPerfBpf::Load(const BpfConfig& config) {
  std::unique_ptr<PyPerfBpf> self(new PyPerfBpf(config));
  uint64_t stack_bytes = config.user_stack_pages ? config.user_stack_pages * 4096ull : 8;
  // The kernel is asked only when the config does not say.
  bool probe_read_user =
      config.probe_read_user ? *config.probe_read_user : KernelHasProbeReadUser();
  std::vector<std::string> cflags = {
      "-DNUM_CPUS=" + std::to_string(libbpf_num_possible_cpus()),
      "-DUSER_STACK_PAGES=" + std::to_string(config.user_stack_pages),
      "-DUSER_STACK_MASK=" + std::to_string(NextPowerOfTwoMask(stack_bytes)),
      "-DSYMBOLS_MAP_SIZE=" + std::to_string(config.symbols_map_size),
      // A code object per symbol, and one per class a method runs for.
      "-DCODE_SYMBOLS_MAP_SIZE=" + std::to_string(config.symbols_map_size),
      "-DKERNEL_STACKS_MAP_SIZE=" + std::to_string(config.kernel_stacks_map_size),
      "-DFRAMES_PER_PROG=" + std::to_string(kFramesPerProg),
      "-DTHREADS_PER_PROG=" + std::to_string(kThreadsPerProg),
      "-DMAX_THREAD_WALKS=" + std::to_string(kMaxThreadWalks),
      "-DPYPERF_PROBE_READ_USER=" + std::to_string(probe_read_user),
      "-DPYPERF_ASYNC_TASKS=" + std::to_string(config.async_tasks ? 1 : 0),
  };
  auto bpf = CompileBpfProgram(PyPerfBpfProgramText(), cflags);
  if (!bpf.ok()) return bpf.status();
  self->bpf_ = std::move(*bpf);

  auto progs = self->bpf_->get_prog_table("progs");
  // In the order of PROG_FIND_THREAD_STATE, PROG_WALK_PYTHON_STACK,
  // PROG_WALK_TASKS (compiled with --async-tasks only).
  const char* tail_programs[] = {"find_thread_state", "walk_python_stack", "walk_tasks"};
  for (int i = 0; i < (config.async_tasks ? 3 : 2); ++i) {
    int fd = -1;
    Status loaded = LoadBpfFunction(*self->bpf_, tail_programs[i], BPF_PROG_TYPE_PERF_EVENT, &fd);
    if (!loaded.ok()) return loaded;
    auto st = progs.update_value(i, fd);
    if (!st.ok()) return Status::Error("cannot install tail call: " + st.msg());
  }
  self->kernel_stacks_fd_[0] = self->bpf_->get_stack_table("kernel_stacks_even").get_fd();
  self->kernel_stacks_fd_[1] = self->bpf_->get_stack_table("kernel_stacks_odd").get_fd();
  // Loaded now so that attaching later reuses it (and prints nothing).
  int main_fd = -1;
  Status loaded = LoadBpfFunction(*self->bpf_, "on_sample", BPF_PROG_TYPE_PERF_EVENT, &main_fd);
  if (!loaded.ok()) return loaded;
  // Execs are watched from now on, before any process is inspected: an exec
  // between an inspection and the process's first sample is seen too.
  int exec_fd = -1;
  loaded = LoadBpfFunction(*self->bpf_, "on_exec", BPF_PROG_TYPE_RAW_TRACEPOINT, &exec_fd);
  if (!loaded.ok()) return loaded;
  auto exec_attached = self->bpf_->attach_raw_tracepoint("sched_process_exec", "on_exec");
  if (!exec_attached.ok())
    return Status::Error("cannot attach to the sched_process_exec tracepoint: " +
                         exec_attached.msg());
  return self;
}

PyPerfBpf::~PyPerfBpf() { Detach(); }

Result<std::vector<pyperf_offset_check_result>> PyPerfBpf::SampleOffsetCheck(
    const pyperf_offset_check_input& input, const OffsetCheckSampling& sampling) {
  using Clock = std::chrono::steady_clock;
  auto results = bpf_->get_array_table<pyperf_offset_check_result>("offset_check_results");
  for (int i = 0; i < PYPERF_CHECK_CANDIDATES; ++i) {
    auto st = results.update_value(i, pyperf_offset_check_result{});
    if (!st.ok()) return Status::Error("cannot reset the offset check: " + st.msg());
  }
  auto st =
      bpf_->get_array_table<pyperf_offset_check_input>("offset_check_input").update_value(0, input);
  if (!st.ok()) return Status::Error("cannot set up the offset check: " + st.msg());

  int prog_fd = -1;
  Status loaded = LoadBpfFunction(*bpf_, kCheckProgram, BPF_PROG_TYPE_PERF_EVENT, &prog_fd);
  if (!loaded.ok()) return loaded;
  auto perf = OpenThreadClockSampler(sampling.period_ns);
  Status ready = perf.ok() ? AttachBpfToPerfEvent(*perf, prog_fd) : perf.status();
  if (ready.ok()) ready = EnablePerfEvent(*perf);
  if (ready.ok()) {
    // Busy in user mode, reading the count now and then: what matters is the
    // thread's CPU time, which a busy host may withhold for a while.
    auto deadline = Clock::now() + sampling.deadline;
    volatile uint64_t spin = 0;
    pyperf_offset_check_result first = {};
    while (true) {
      auto until = Clock::now() + kCheckSpin;
      while (Clock::now() < until) spin = spin + 1;
      results.get_value(0, first);
      if (first.user_samples >= sampling.min_user_samples || Clock::now() >= deadline) break;
    }
    // Closing the event just below stops it too: a failed disable only lets
    // it run until then, and the results are read after that.
    (void)DisablePerfEvent(*perf);
  }
  if (perf.ok()) perf->reset();
  bpf_->unload_func(kCheckProgram);
  if (!ready.ok()) return ready;

  size_t count = std::min<size_t>(input.candidate_count, PYPERF_CHECK_CANDIDATES);
  std::vector<pyperf_offset_check_result> seen(count);
  for (size_t i = 0; i < count; ++i) {
    auto got = results.get_value(static_cast<int>(i), seen[i]);
    if (!got.ok()) return Status::Error("cannot read the offset check: " + got.msg());
  }
  return seen;
}

Status PyPerfBpf::SetKernelOffsets(const pyperf_kernel_offsets& offsets) {
  auto table = bpf_->get_array_table<pyperf_kernel_offsets>("kernel_offsets");
  auto st = table.update_value(0, offsets);
  if (!st.ok()) return Status::Error("cannot store the task_struct offsets: " + st.msg());
  return Status::Ok();
}

Status PyPerfBpf::SetLayout(uint32_t index, const pyperf_offsets& offsets) {
  auto table = bpf_->get_array_table<pyperf_offsets>("py_offsets");
  auto st = table.update_value(index, offsets);
  if (!st.ok()) return Status::Error("cannot store offset table: " + st.msg());
  return Status::Ok();
}

Status PyPerfBpf::AddProcess(pid_t pid, const pyperf_proc_info& info) {
  auto table = bpf_->get_hash_table<uint32_t, pyperf_proc_info>("py_procs");
  auto st = table.update_value(static_cast<uint32_t>(pid), info);
  if (!st.ok()) return Status::Error("cannot add process " + std::to_string(pid) + ": " + st.msg());
  return Status::Ok();
}

uint64_t PyPerfBpf::ExecTime(pid_t pid) {
  auto table = bpf_->get_hash_table<uint32_t, uint64_t>("exec_times");
  uint64_t time = 0;
  if (!table.get_value(static_cast<uint32_t>(pid), time).ok()) return 0;
  return time;
}

void PyPerfBpf::RemoveProcess(pid_t pid) {
  auto table = bpf_->get_hash_table<uint32_t, pyperf_proc_info>("py_procs");
  table.remove_value(static_cast<uint32_t>(pid));
}

void PyPerfBpf::HandleEvent(void* cookie, void* data, int size) {
  auto* self = static_cast<PyPerfBpf*>(cookie);
  if (size < static_cast<int>(offsetof(pyperf_event, user_stack))) return;
  // The rings hand each event over 8-byte aligned, as its fields need.
  self->on_event_(*static_cast<const pyperf_event*>(data), static_cast<size_t>(size));
}

void PyPerfBpf::HandleLost(void* cookie, uint64_t lost) {
  static_cast<PyPerfBpf*>(cookie)->on_lost_(lost);
}

Status PyPerfBpf::OpenEvents(EventCallback on_event, LostCallback on_lost) {
  on_event_ = std::move(on_event);
  on_lost_ = std::move(on_lost);
  // A ring wakes Poll once half of it is written (~20 events of a native
  // sample's size): the other half takes the events that arrive while user
  // space reads.
  PerfOutputRings::Options options;
  options.map_fd = bpf_->get_table("events").get_fd();
  options.pages_per_cpu = static_cast<int>(config_.events_buffer_pages);
  options.wakeup_bytes = 0;  // half the ring
  options.on_record = &PyPerfBpf::HandleEvent;
  options.on_lost = &PyPerfBpf::HandleLost;
  options.cookie = this;
  auto buffer = PerfOutputRings::Open(options);
  if (!buffer.ok()) return buffer.status();
  events_ = std::move(*buffer);
  return Status::Ok();
}

Status PyPerfBpf::Attach() {
  auto st = bpf_->attach_perf_event(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, "on_sample",
                                    config_.sample_period_ns, config_.sample_frequency);
  if (!st.ok()) return Status::Error("cannot attach to the CPU-clock perf event: " + st.msg());
  attached_ = true;
  return Status::Ok();
}

void PyPerfBpf::Detach() {
  if (attached_) {
    bpf_->detach_perf_event(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK);
    attached_ = false;
  }
}

int PyPerfBpf::Poll(int timeout_ms) { return events_ ? events_->Poll(timeout_ms) : 0; }

std::optional<pyperf_symbol> PyPerfBpf::LookupSymbol(int32_t id) {
  auto table = bpf_->get_hash_table<int32_t, pyperf_symbol_slot>("symbol_by_id");
  pyperf_symbol_slot slot;
  if (!table.get_value(id, slot).ok()) return std::nullopt;
  return slot.symbol;
}

bool PyPerfBpf::RetireSymbol(int32_t id) {
  auto by_id = bpf_->get_hash_table<int32_t, pyperf_symbol_slot>("symbol_by_id");
  auto by_key = bpf_->get_hash_table<pyperf_symbol, int32_t>("symbols");
  pyperf_symbol_slot slot;
  if (!by_id.get_value(id, slot).ok()) return false;
  // The key first: from then on the program interns the code again under a
  // new id rather than hand out this one. code_symbols entries that name the
  // id stop being used once it leaves symbol_by_id (their stamp no longer
  // matches), so they need no walk here.
  int32_t current = 0;
  if (by_key.get_value(slot.symbol, current).ok() && current == id)
    by_key.remove_value(slot.symbol);
  return by_id.remove_value(id).ok();
}

std::optional<std::vector<uint64_t>> PyPerfBpf::SymbolCounter(uint32_t slot) {
  // Read once per round: libbcc's per-CPU table wrapper would read
  // /sys/devices/system/cpu/possible at each call (three system calls), while
  // libbpf_num_possible_cpus reads it once per process.
  const int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) return std::nullopt;
  std::vector<uint64_t> per_cpu(static_cast<size_t>(cpus));
  if (bpf_lookup_elem(bpf_->get_table("symbol_counter").get_fd(), &slot, per_cpu.data()) != 0)
    return std::nullopt;
  return per_cpu;
}

std::optional<std::vector<uint64_t>> PyPerfBpf::InternedSymbols() {
  return SymbolCounter(PYPERF_SYMBOL_INTERNED);
}

PyPerfBpf::CodeCacheCounts PyPerfBpf::CodeCache() {
  CodeCacheCounts counts;
  for (uint64_t n : SymbolCounter(PYPERF_SYMBOL_CODE_HITS).value_or(std::vector<uint64_t>{}))
    counts.hits += n;
  for (uint64_t n : SymbolCounter(PYPERF_SYMBOL_CODE_MISSES).value_or(std::vector<uint64_t>{}))
    counts.misses += n;
  return counts;
}

std::vector<int32_t> PyPerfBpf::SymbolIds() {
  std::vector<int32_t> ids;
  ReadInt32Keys(bpf_->get_hash_table<int32_t, pyperf_symbol_slot>("symbol_by_id").get_fd(), &ids);
  return ids;
}

namespace {
// Entries of a map whose keys are u32 (pids, tids), by a walk of its keys.
size_t CountUint32Keys(int map_fd) {
  size_t n = 0;
  uint32_t key = 0, next = 0;
  for (const void* from = nullptr; bpf_map_get_next_key(map_fd, from, &next) == 0; from = &key) {
    ++n;
    key = next;
  }
  return n;
}
}  // namespace

PyPerfBpf::MapFill PyPerfBpf::ReadMapFill() {
  MapFill fill;
  auto procs = bpf_->get_hash_table<uint32_t, pyperf_proc_info>("py_procs");
  fill.py_procs = CountUint32Keys(procs.get_fd());
  fill.py_procs_max = PYPERF_MAX_PROCESSES;
  auto threads = bpf_->get_hash_table<uint32_t, uint64_t>("thread_states");
  fill.thread_states = CountUint32Keys(threads.get_fd());
  fill.thread_states_max = PYPERF_MAX_THREAD_STATES;
  return fill;
}

bool PyPerfBpf::ReadKernelStack(uint32_t generation, int32_t stack_id, std::vector<uint64_t>* out) {
  out->clear();
  if (stack_id < 0 ||
      bpf_map_lookup_elem(kernel_stacks_fd_[generation & 1], &stack_id, &kernel_stack_) != 0)
    return false;
  for (uintptr_t ip : kernel_stack_.ip) {
    if (ip == 0) break;
    out->push_back(ip);
  }
  return true;
}

Result<size_t> PyPerfBpf::StartKernelStackGeneration(uint32_t next_generation) {
  // The map the next generation fills holds the one before the current's,
  // which the program no longer writes: its ids are held first, then
  // deleted (the walk needs each id it starts from to be held still).
  const int fd = kernel_stacks_fd_[next_generation & 1];
  ReadInt32Keys(fd, &kernel_stack_ids_);
  size_t freed = 0;
  for (int32_t held : kernel_stack_ids_) freed += bpf_map_delete_elem(fd, &held) == 0;
  auto st =
      bpf_->get_array_table<uint32_t>("kernel_stack_generation").update_value(0, next_generation);
  if (!st.ok()) return Status::Error("cannot set the kernel stacks' generation: " + st.msg());
  return freed;
}

}  // namespace ebpf::pyperf
