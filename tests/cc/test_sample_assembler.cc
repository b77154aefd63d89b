// SampleAssembler: one BPF event -> one Sample, as PyPerf builds it for every
// event: markers first, then Python frames root first (lost and missing
// symbols marked), native frames root first (error and truncation markers),
// kernel frames root first (named, or by address; a lost stack marked), a
// sample without any frame marked, and the comm made valid UTF-8. The
// events are made by hand; the symbols come from a fake symbols map, the
// kernel stacks from a fake stack source.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "FrameSpelling.h"
#include "NativeStackTrace.h"
#include "PythonStackDecoder.h"
#include "PythonSymbols.h"
#include "SampleAssembler.h"
#include "TrackedProcess.h"
#include "kallsyms.h"
#include "native_fixtures/native_test_helpers.h"
#include "utf8.h"

namespace {

using ebpf::pyperf::FrameDictionary;
using ebpf::pyperf::Sample;

constexpr int32_t kNoKernelStack = -14;

// A symbols map holding one function per id, all in /app/srv.py.
std::optional<pyperf_symbol> FakeSymbol(const std::map<int32_t, std::string>& functions,
                                        int32_t id) {
  auto it = functions.find(id);
  if (it == functions.end()) return std::nullopt;
  pyperf_symbol s{};
  std::memcpy(s.function, it->second.data(), it->second.size());
  s.function_text.size = static_cast<uint32_t>(it->second.size());
  s.function_text.encoding = PYPERF_TEXT_LATIN1;
  std::memcpy(s.class_name, "Handler", 7);
  s.class_text.size = 7;
  s.class_text.encoding = PYPERF_TEXT_LATIN1;
  std::memcpy(s.file, "/app/srv.py", 11);
  s.file_text.size = 11;
  s.file_text.encoding = PYPERF_TEXT_LATIN1;
  s.first_line = 10 + id;
  return s;
}

class FakeKernelStacks final : public ebpf::pyperf::KernelStackSource {
 public:
  std::map<int32_t, std::vector<uint64_t>> stacks;  // leaf first
  bool Read(uint32_t, int32_t stack_id, std::vector<uint64_t>* out) override {
    auto it = stacks.find(stack_id);
    if (it == stacks.end()) return false;
    *out = it->second;
    return true;
  }
};

class SampleAssemblerTest : public ::testing::Test {
 protected:
  SampleAssemblerTest() {
    ebpf::pyperf::PythonSymbolTable::Maps maps;
    maps.lookup = [this](int32_t id) { return FakeSymbol(functions_, id); };
    maps.retire = [](int32_t) { return false; };
    maps.interned = [] { return std::optional<std::vector<uint64_t>>(std::vector<uint64_t>{0}); };
    maps.ids = [] { return std::vector<int32_t>(); };
    symbols_ = std::make_unique<ebpf::pyperf::PythonSymbolTable>(
        std::move(maps), ebpf::pyperf::PythonSymbolTable::Limits{});
    python_ = std::make_unique<ebpf::pyperf::PythonStackDecoder>(symbols_.get(), false);
    auto ksyms = ebpf::KernelSymbols::Parse(
        "ffffffff81001000 T do_syscall_64\nffffffff81002000 t read_zero\n");
    EXPECT_TRUE(ksyms.ok());
    kallsyms_ = std::move(*ksyms);
    assembler_ =
        std::make_unique<ebpf::pyperf::SampleAssembler>(python_.get(), &kernel_, &kallsyms_);
    process_.pid = 7;
    event_ = std::make_unique<pyperf_event>();
    std::memset(event_.get(), 0, sizeof(pyperf_event));
    event_->pid = 7;
    event_->tid = 8;
    std::memcpy(event_->comm, "worker", 6);
    event_->kernel_stack_id = kNoKernelStack;
  }

  // The event assembled into `dictionary`, spelled as its collapsed line.
  std::string Assemble(FrameDictionary* dictionary) {
    assembler_->Assemble(*event_, sizeof(pyperf_event), process_, dictionary, &sample_);
    std::string line;
    ebpf::pyperf::StackSpeller(*dictionary).AppendCollapsedStack(sample_, &line);
    return line;
  }
  std::string Assemble() { return Assemble(&dictionary_); }

  void SetPythonFrames(const std::vector<int32_t>& leaf_first_ids) {
    event_->frame_count = static_cast<uint32_t>(leaf_first_ids.size());
    for (size_t i = 0; i < leaf_first_ids.size(); ++i) {
      event_->frames[i].symbol_id = leaf_first_ids[i];
      event_->frames[i].lasti = -1;
    }
  }

  std::map<int32_t, std::string> functions_{{1, "serve"}, {2, "handle"}};
  std::unique_ptr<ebpf::pyperf::PythonSymbolTable> symbols_;
  std::unique_ptr<ebpf::pyperf::PythonStackDecoder> python_;
  FakeKernelStacks kernel_;
  ebpf::KernelSymbols kallsyms_;
  std::unique_ptr<ebpf::pyperf::SampleAssembler> assembler_;
  ebpf::pyperf::TrackedProcess process_;
  std::unique_ptr<pyperf_event> event_;
  FrameDictionary dictionary_;
  Sample sample_;
};

TEST_F(SampleAssemblerTest, ASampleWithoutAnyFrameGetsTheNoFramesMarker) {
  EXPECT_EQ(Assemble(), "worker-7/8;[No Frames]_[pe]");
}

TEST_F(SampleAssemblerTest, PythonFramesComeRootFirstAfterTheEventsMarkers) {
  event_->truncated = 1;
  event_->error = PYPERF_ERROR_FRAME_CYCLE;
  SetPythonFrames({2, PYPERF_SYMBOL_MISSING, PYPERF_SYMBOL_LOST, 99, 1});
  EXPECT_EQ(Assemble(),
            "worker-7/8;[Truncated Python Stack]_[pe];[Sample Error FRAME_CYCLE]_[pe];"
            "app.srv.Handler.serve (/app/srv.py:11)_[p];[Lost Symbol]_[pe];[Lost Symbol]_[pe];"
            "(missing)_[pe];app.srv.Handler.handle (/app/srv.py:12)_[p]");
  const ebpf::pyperf::SampleCounters& counters = assembler_->counters();
  EXPECT_EQ(counters.truncated, 1u);
  EXPECT_EQ(counters.sample_errors, 1u);
  EXPECT_EQ(counters.symbol_errors, 3u);  // 99 is in no map, -1 was lost, one is missing
}

// --async-tasks: the chain root first (the event holds it leaf first), each
// task "name (coroutine)"; then the running task's own frames only, from its
// coroutine's (task_frame) to the leaf; the event loop's frames below are not
// the task's. Without the mode, or without the coroutine's frame among the
// Python frames, the sample is as ever.
TEST_F(SampleAssemblerTest, AsyncTasksComeRootFirstBeforeTheRunningTasksOwnFrames) {
  functions_[3] = "run_forever";
  SetPythonFrames({2, 1, 3});  // handle <- serve <- run_forever (the loop)
  event_->task_count = 3;
  auto set_task = [&](int i, const char* name, int32_t coro) {
    pyperf_task& t = event_->tasks[i];
    t.coro_symbol = coro;
    t.name_kind = PYPERF_TASK_NAME_TEXT;
    t.name_text.size = static_cast<uint32_t>(std::strlen(name));
    t.name_text.encoding = PYPERF_TEXT_UTF8;
    std::memcpy(t.name, name, std::strlen(name));
  };
  set_task(0, "requ\xc3\xaate;7", 1);
  event_->tasks[1].name_kind = PYPERF_TASK_NAME_NUMBER;
  event_->tasks[1].number = 12;
  event_->tasks[1].coro_symbol = PYPERF_SYMBOL_LOST;
  set_task(2, "main", 3);
  event_->task_error = PYPERF_TASK_ERROR_TOO_DEEP;
  event_->task_frame = 2;  // serve: the running task's coroutine
  const std::string plain =
      "worker-7/8;app.srv.Handler.run_forever (/app/srv.py:13)_[p];"
      "app.srv.Handler.serve (/app/srv.py:11)_[p];app.srv.Handler.handle (/app/srv.py:12)_[p]";
  EXPECT_EQ(Assemble(), plain) << "without --async-tasks";
  assembler_->set_async_tasks(true);
  EXPECT_EQ(
      Assemble(),
      "worker-7/8;[Task Chain Too Deep]_[pe];main (Handler.run_forever)_[pt];"
      "Task-12 ([Lost Symbol])_[pt];requ\xc3\xaate_7 (Handler.serve)_[pt];"
      "app.srv.Handler.serve (/app/srv.py:11)_[p];app.srv.Handler.handle (/app/srv.py:12)_[p]");
  EXPECT_EQ(assembler_->counters().task_samples, 1u);
  EXPECT_EQ(assembler_->counters().task_errors, 2u);  // the chain's end, a lost coroutine
  event_->task_frame = 0;  // the coroutine's frame not among them: no tasks
  EXPECT_EQ(Assemble(), plain);
}

TEST_F(SampleAssemblerTest, AReplacedProcessShowsTheMarkerAndNoPythonFrame) {
  SetPythonFrames({2, 1});
  event_->replaced = 1;
  EXPECT_EQ(Assemble(), "worker-7/8;[Process Replaced]_[pe]");
  EXPECT_EQ(assembler_->counters().replaced, 1u);
}

TEST_F(SampleAssemblerTest, KernelFramesAreNamedOrShownByAddressRootFirst) {
  SetPythonFrames({1});
  kernel_.stacks[5] = {0xffffffff81002010, 0xffffffff81001020, 0x1234};
  event_->kernel_stack_id = 5;
  EXPECT_EQ(Assemble(),
            "worker-7/8;app.srv.Handler.serve (/app/srv.py:11)_[p];0x1234_[k];do_syscall_64_[k];"
            "read_zero_[k]");
  event_->kernel_stack_id = 6;  // not in the map: lost
  EXPECT_EQ(Assemble(),
            "worker-7/8;app.srv.Handler.serve (/app/srv.py:11)_[p];[Lost Kernel Stack]_[pe]");
  event_->kernel_stack_id = -12;  // -ENOMEM when it was taken
  EXPECT_EQ(Assemble(),
            "worker-7/8;app.srv.Handler.serve (/app/srv.py:11)_[p];[Lost Kernel Stack]_[pe]");
  EXPECT_EQ(assembler_->counters().kernel_stack_errors, 2u);
}

TEST_F(SampleAssemblerTest, TheCommIsMadeValidUtf8AndKeptUnescapedInTheSample) {
  std::memset(event_->comm, 0, sizeof(event_->comm));
  std::memcpy(event_->comm, "w\xff;x\n", 5);
  Assemble();
  const std::string_view comm = dictionary_.String(sample_.comm);
  EXPECT_TRUE(ebpf::IsPrintableUtf8(comm.substr(0, 4)));
  EXPECT_EQ(comm, "w\xef\xbf\xbd;x\n");  // U+FFFD for the bad byte; escaped only when spelled
  EXPECT_EQ(Assemble(), "w\xef\xbf\xbd_x_-7/8;[No Frames]_[pe]");
}

TEST_F(SampleAssemblerTest, PythonNamesAreRightInEveryDictionary) {
  SetPythonFrames({2, 1});
  const std::string expected =
      "worker-7/8;app.srv.Handler.serve (/app/srv.py:11)_[p];"
      "app.srv.Handler.handle (/app/srv.py:12)_[p]";
  EXPECT_EQ(Assemble(), expected);
  // A dictionary with other strings first: a symbol's ids kept from the
  // first one would name something else here.
  FrameDictionary other;
  other.Intern("unrelated");
  other.Intern("/elsewhere.py");
  EXPECT_EQ(Assemble(&other), expected);
  dictionary_.Clear();
  dictionary_.Intern("x");
  EXPECT_EQ(Assemble(), expected);
}

// Leaf mode's native frames on a real stack: the native fixture process
// (no BPF; it captured its own registers and stack, as the BPF program does)
// stands for an interpreter whose eval loop is pyperf_fixture_middle.
class LeafNativeFramesTest : public SampleAssemblerTest {
 protected:
  void SetUp() override { PYPERF_REQUIRE_NATIVE_FIXTURES(); }
  void TearDown() override { ebpf::pyperf::NativeStackTrace::Reset(); }

  // The event of the capture, its stack copy after it; returns its size.
  size_t EventOf(const pyperf_fixture::CapturedSnapshot& snapshot) {
    buffer_.assign(sizeof(pyperf_event) + snapshot.stack.size(), 0);
    std::memcpy(buffer_.data(), event_.get(), sizeof(pyperf_event));
    auto* event = reinterpret_cast<pyperf_event*>(buffer_.data());
    event->pid = event->tid = static_cast<uint32_t>(snapshot.pid);
    event->ip = snapshot.ip;
    event->sp = event->user_stack_start = snapshot.sp;
    event->bp = snapshot.bp;
    event->user_stack_len = static_cast<uint32_t>(snapshot.stack.size());
    std::memcpy(event->user_stack, snapshot.stack.data(), snapshot.stack.size());
    return buffer_.size();
  }
  std::string AssembleCaptured(size_t size) {
    process_.pid = reinterpret_cast<pyperf_event*>(buffer_.data())->pid;
    assembler_->Assemble(*reinterpret_cast<pyperf_event*>(buffer_.data()), size, process_,
                         &dictionary_, &sample_);
    std::string line;
    ebpf::pyperf::StackSpeller(dictionary_).AppendCollapsedStack(sample_, &line);
    return line;
  }
  std::vector<uint8_t> buffer_;
};

TEST_F(LeafNativeFramesTest, AnUnwindPastEveryEvalLoopFrameShowsAMarkerNotTheStacksStart) {
  std::string error;
  auto run = pyperf_fixture::StartFixture("stripped", 2, &error);
  ASSERT_TRUE(run) << error;
  SetPythonFrames({2, 1});

  // The eval loop is found (by its symbol): the frames up to it.
  ebpf::NativeUnwinderOptions options;
  options.stop_symbols = {"pyperf_fixture_middle"};
  ebpf::pyperf::NativeStackTrace::Configure(options);
  size_t size = EventOf(run->snapshot);
  std::string line = AssembleCaptured(size);
  EXPECT_NE(line.find("srv.Handler.handle (/app/srv.py:12)_[p];pyperf_fixture_middle_[pn];"),
            std::string::npos)
      << line;
  EXPECT_EQ(assembler_->counters().eval_loop_not_found, 0u);

  // ... by the anchor of the innermost call's entry shim, a local of its
  // frame: the same frames, no symbol needed.
  options.stop_symbols = {};
  ebpf::pyperf::NativeStackTrace::Configure(options);
  ebpf::NativeUnwinder probe;
  std::vector<ebpf::NativeFrame> whole;
  probe.Unwind(run->snapshot.View(), &whole);
  ASSERT_GE(whole.size(), 4u);
  ASSERT_EQ(whole[2].name, "pyperf_fixture_middle");
  auto* event = reinterpret_cast<pyperf_event*>(buffer_.data());
  event->entries[1] = static_cast<uint32_t>(whole[2].sp - event->sp) + PYPERF_ENTRY_ANCHOR_BASE;
  EXPECT_EQ(ebpf::pyperf::InnermostCallAnchor(*event), whole[2].sp);
  EXPECT_EQ(AssembleCaptured(size), line);

  // Not found: the unwind reached the stack's bottom (main, the C library's
  // start) under the Python frames, which is never where they ran.
  event->entries[1] = PYPERF_ENTRY_UNANCHORED;
  line = AssembleCaptured(size);
  EXPECT_NE(line.find("srv.Handler.handle (/app/srv.py:12)_[p];[Eval Loop Frame Not Found]_[pe]"),
            std::string::npos)
      << line;
  EXPECT_EQ(line.find("main_[pn]"), std::string::npos) << line;
  EXPECT_EQ(assembler_->counters().eval_loop_not_found, 1u);

  // Without Python frames (a native thread) the whole stack is the sample.
  event->frame_count = 0;
  line = AssembleCaptured(size);
  EXPECT_NE(line.find("main_[pn]"), std::string::npos) << line;
  EXPECT_EQ(assembler_->counters().eval_loop_not_found, 1u);
}

TEST(AppendNativeSampleFrames, FramesComeRootFirstWithTheirMarkers) {
  std::vector<ebpf::NativeFrame> leaf_first(3);
  leaf_first[0].name = "memcpy";
  leaf_first[0].file = ebpf::FileId{1, 2};  // no unwinder to describe it: no object
  leaf_first[0].elf_address = 0x1234;
  leaf_first[1].name = "handle;request";
  leaf_first[2].name = "unw_step (no unwind info)";
  leaf_first[2].error = true;
  ebpf::NativeUnwindResult result;
  result.error = true;
  result.truncated = true;
  FrameDictionary dictionary;
  Sample sample;
  sample.pid = sample.tid = 1;
  sample.comm = dictionary.Intern("c");
  ebpf::pyperf::AppendNativeSampleFrames(leaf_first, result, nullptr, &dictionary, &sample.frames);
  std::string line;
  ebpf::pyperf::StackSpeller(dictionary).AppendCollapsedStack(sample, &line);
  EXPECT_EQ(line,
            "c-1/1;[Truncated Native Stack]_[pe];[Native Stack Error: unw_step (no unwind "
            "info)]_[pe];handle_request_[pn];memcpy_[pn]");
  EXPECT_EQ(sample.frames.back().object, 0u);
  EXPECT_EQ(sample.frames.back().address, 0u);  // an address means nothing without its file
}

}  // namespace
