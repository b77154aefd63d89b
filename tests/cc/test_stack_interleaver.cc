// StackInterleaver: Python frames placed among native frames, each eval-loop
// frame replaced by the Python frames its call ran, on stacks made by hand:
// one call per frame (before 3.11), runs of frames between entry frames
// (3.11+), calls found by their shim's place on the stack where the eval loop
// has no name (stripped 3.14+), and every case where the two do not pair up or
// the stack copy ended, each of which must show a marker and lose no frame.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "FrameSpelling.h"
#include "PyPerfBpfShared.h"
#include "StackInterleaver.h"

namespace {

using ebpf::NativeFrame;
using ebpf::NativeUnwindResult;
using ebpf::pyperf::AppendInterleavedFrames;
using ebpf::pyperf::FrameDictionary;
using ebpf::pyperf::FrameKind;
using ebpf::pyperf::InterleaveCounters;
using ebpf::pyperf::PythonCalls;
using ebpf::pyperf::SampleFrame;

constexpr uint64_t kSp = 0x7fff0000;

// A stack made by hand: Python frames root first with their entries, native
// frames leaf first.
struct Stack {
  std::vector<std::string> python;
  std::vector<uint32_t> entries;
  bool complete = true;
  std::vector<NativeFrame> native;
  NativeUnwindResult result;
};

// A native frame at sp kSp + offset; `eval` marks the eval loop's symbol.
NativeFrame Native(const std::string& name, uint64_t offset, bool eval = false) {
  NativeFrame f;
  f.name = name;
  f.sp = kSp + offset;
  f.stop_symbol = eval;
  f.symbolized = true;
  return f;
}

uint32_t Anchor(uint64_t offset) {
  return PYPERF_ENTRY_ANCHOR_BASE + static_cast<uint32_t>(offset);
}

// The interleaved frames, each as "name_[p]", "name_[pn]" or "text_[pe]".
std::vector<std::string> Interleave(const Stack& stack, InterleaveCounters* counters = nullptr) {
  FrameDictionary dictionary;
  std::vector<SampleFrame> python;
  for (const auto& name : stack.python) {
    SampleFrame f;
    f.kind = FrameKind::kPython;
    f.name = dictionary.Intern(name);
    python.push_back(f);
  }
  PythonCalls calls;
  calls.frames = &python;
  calls.entries = &stack.entries;
  calls.complete = stack.complete;
  InterleaveCounters local;
  std::vector<SampleFrame> out;
  AppendInterleavedFrames(calls, kSp, stack.native, stack.result, nullptr, &dictionary, &out,
                          counters ? counters : &local);
  std::vector<std::string> spelled;
  for (const auto& f : out) {
    const char* suffix = f.kind == FrameKind::kPython   ? "_[p]"
                         : f.kind == FrameKind::kNative ? "_[pn]"
                                                        : "_[pe]";
    spelled.push_back(std::string(dictionary.String(f.name)) + suffix);
  }
  return spelled;
}

std::string Marker(std::string_view text) { return std::string(text) + "_[pe]"; }

constexpr uint32_t kOwn = PYPERF_ENTRY_UNANCHORED;  // before 3.11: every frame its own call
constexpr uint32_t kNone = PYPERF_ENTRY_NONE;

TEST(StackInterleaver, EachEvalLoopFrameBecomesThePythonFrameItRan) {
  // main -> eval(<module>) -> call_function -> eval(work) -> sorted -> eval(key) -> leaf
  Stack s;
  s.python = {"<module>", "work", "key"};
  s.entries = {kOwn, kOwn, kOwn};
  s.native = {
      Native("leaf_c", 0),         Native("eval", 0x10, true),     Native("list_sort", 0x100),
      Native("eval", 0x200, true), Native("call_function", 0x300), Native("eval", 0x400, true),
      Native("main", 0x500)};
  EXPECT_EQ(Interleave(s),
            (std::vector<std::string>{"main_[pn]", "<module>_[p]", "call_function_[pn]", "work_[p]",
                                      "list_sort_[pn]", "key_[p]", "leaf_c_[pn]"}));
}

TEST(StackInterleaver, AnEvalLoopCallRunsTheFramesUpToItsEntryFrame) {
  // 3.11: <module> calls work inside one eval call; work calls sorted, whose
  // key runs in a second call.
  Stack s;
  s.python = {"<module>", "work", "key", "helper"};
  s.entries = {kOwn, kNone, kOwn, kNone};
  s.native = {Native("eval", 0, true), Native("list_sort", 0x100), Native("eval", 0x200, true),
              Native("main", 0x300)};
  EXPECT_EQ(Interleave(s), (std::vector<std::string>{"main_[pn]", "<module>_[p]", "work_[p]",
                                                     "list_sort_[pn]", "key_[p]", "helper_[p]"}));
}

TEST(StackInterleaver, ShimsOnTheStackFindEvalLoopFramesThatHaveNoName) {
  // A stripped 3.14: the eval loop's frames are addresses; each call's shim
  // lies in the frame that runs it.
  Stack s;
  s.python = {"<module>", "work", "key"};
  s.entries = {Anchor(0x3f0), kNone, Anchor(0x180)};
  s.native = {Native("python3.14+0x10", 0x40), Native("python3.14+0x5cdca3", 0x100),
              Native("list_sort", 0x200), Native("python3.14+0x5cdca3", 0x300),
              Native("main", 0x480)};
  // The leaf's sp is kSp (the sample's); the first frame listed is the leaf.
  s.native.front().sp = kSp;
  EXPECT_EQ(Interleave(s),
            (std::vector<std::string>{"main_[pn]", "<module>_[p]", "work_[p]", "list_sort_[pn]",
                                      "key_[p]", "python3.14+0x10_[pn]"}));
}

TEST(StackInterleaver, AShimOutsideItsNamedEvalLoopFrameIsUnpairedAndKeepsEveryFrame) {
  Stack s;
  s.python = {"<module>", "key"};
  s.entries = {Anchor(0x2f0), Anchor(0x10)};  // key's shim lies in leaf_c, not in the eval frame
  s.native = {Native("leaf_c", 0), Native("eval", 0x100, true), Native("eval", 0x200, true),
              Native("main", 0x300)};
  InterleaveCounters counters;
  EXPECT_EQ(Interleave(s, &counters),
            (std::vector<std::string>{"<module>_[p]", "key_[p]",
                                      Marker(ebpf::pyperf::kUnpairedEvalLoopFrames), "main_[pn]",
                                      "eval_[pn]", "eval_[pn]", "leaf_c_[pn]"}));
  EXPECT_EQ(counters.unpaired, 1u);
}

// Every other way of not pairing up: every Python frame, the marker, every
// native frame.
TEST(StackInterleaver, StacksThatDoNotPairUpAreUnpairedAndKeepEveryFrame) {
  struct Case {
    const char* what;
    Stack stack;
  };
  std::vector<Case> cases(3);
  // A call being entered: its eval frame is on the stack, its frame not yet
  // linked to the thread.
  cases[0].what = "an eval loop frame without a Python call";
  cases[0].stack.python = {"<module>"};
  cases[0].stack.entries = {kOwn};
  cases[0].stack.native = {Native("eval", 0, true), Native("call", 0x100),
                           Native("eval", 0x200, true), Native("main", 0x300)};
  cases[1].what = "a whole stack with a call left over";
  cases[1].stack.python = {"<module>", "work"};
  cases[1].stack.entries = {kOwn, kOwn};
  cases[1].stack.native = {Native("eval", 0, true), Native("main", 0x100)};
  // 3.11+: a walk that reached the thread's first frame, whose root-most
  // frames are no call's entry (a chain the process cut).
  cases[2].what = "a chain that ends without its entry frame";
  cases[2].stack.python = {"middle", "spin"};
  cases[2].stack.entries = {kNone, kNone};
  cases[2].stack.native = {Native("eval", 0, true), Native("main", 0x100)};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    std::vector<std::string> want;
    for (const auto& name : c.stack.python) want.push_back(name + "_[p]");
    want.push_back(Marker(ebpf::pyperf::kUnpairedEvalLoopFrames));
    for (auto it = c.stack.native.rbegin(); it != c.stack.native.rend(); ++it)
      want.push_back(it->name + "_[pn]");
    EXPECT_EQ(Interleave(c.stack), want);
  }
}

TEST(StackInterleaver, WhenTheCopyEndsTheCallsNotReachedComeFirstBehindTheMarker) {
  Stack s;
  s.python = {"<module>", "work", "key"};
  s.entries = {kOwn, kOwn, kOwn};
  s.native = {Native("leaf_c", 0), Native("eval", 0x10, true), Native("list_sort", 0x100)};
  s.result.copy_ended = true;
  InterleaveCounters counters;
  EXPECT_EQ(Interleave(s, &counters),
            (std::vector<std::string>{"<module>_[p]", "work_[p]",
                                      Marker(ebpf::pyperf::kNativeStackCopyEnded), "list_sort_[pn]",
                                      "key_[p]", "leaf_c_[pn]"}));
  EXPECT_EQ(counters.copy_ended, 1u);
  EXPECT_EQ(counters.unpaired, 0u);
}

TEST(StackInterleaver, AShimBeyondTheLastFrameOfACutStackDoesNotNameIt) {
  // The outermost frame unwound is no eval loop: its stack's end is unknown,
  // so the shim of a call further out must not pair with it.
  Stack s;
  s.python = {"<module>", "key"};
  s.entries = {Anchor(0x5000), Anchor(0x20)};
  s.native = {Native("python3.14+0x10", 0), Native("ffi_call", 0x100)};
  s.result.copy_ended = true;
  EXPECT_EQ(Interleave(s),
            (std::vector<std::string>{"<module>_[p]", Marker(ebpf::pyperf::kNativeStackCopyEnded),
                                      "ffi_call_[pn]", "key_[p]"}));
}

TEST(StackInterleaver, APythonWalkCutShortShowsOnlyTheNativeFramesOfItsCalls) {
  // The walk stopped at its frame limit (the assembler prints its marker):
  // eval frames further out have no call, and what is rootward of them goes.
  Stack s;
  s.python = {"level2", "level3"};
  s.entries = {kOwn, kOwn};
  s.complete = false;
  s.native = {Native("eval", 0, true), Native("call", 0x100),       Native("eval", 0x200, true),
              Native("call", 0x300),   Native("eval", 0x400, true), Native("main", 0x500)};
  EXPECT_EQ(Interleave(s),
            (std::vector<std::string>{"call_[pn]", "level2_[p]", "call_[pn]", "level3_[p]"}));
}

TEST(StackInterleaver, WithoutPythonFramesTheNativeStackIsAsUnwound) {
  Stack s;
  s.native = {Native("poll", 0), Native("main", 0x100)};
  EXPECT_EQ(Interleave(s), (std::vector<std::string>{"main_[pn]", "poll_[pn]"}));
}

}  // namespace
