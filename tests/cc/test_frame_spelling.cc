// Tests of FrameSpelling: the spellings gProfiler reads (written out here as
// literals, the one place the tests do not take them from FrameSpelling.h),
// the escaping of outside text, and one sample's stack as StackText builds it.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "FrameSpelling.h"
#include "PyPerfBpfShared.h"
#include "native_unwinder.h"

namespace pyperf {
namespace {

TEST(FrameSpelling, SuffixesAreTheOnesGProfilerReads) {
  EXPECT_EQ(FrameSuffix(FrameKind::kPython), "_[p]");
  EXPECT_EQ(FrameSuffix(FrameKind::kNative), "_[pn]");
  EXPECT_EQ(FrameSuffix(FrameKind::kKernel), "_[k]");
  EXPECT_EQ(FrameSuffix(FrameKind::kMarker), "_[pe]");
}

TEST(FrameSpelling, MarkersAreSpelledAsTheReadmeSays) {
  EXPECT_EQ(SpellFrame(FrameKind::kMarker, kTruncatedPythonStack), "[Truncated Python Stack]_[pe]");
  EXPECT_EQ(SpellFrame(FrameKind::kMarker, kLostSymbol), "[Lost Symbol]_[pe]");
  EXPECT_EQ(SpellFrame(FrameKind::kMarker, kMissingPythonFrame), "(missing)_[pe]");
  EXPECT_EQ(SpellFrame(FrameKind::kMarker, kLostKernelStack), "[Lost Kernel Stack]_[pe]");
  EXPECT_EQ(SpellFrame(FrameKind::kMarker, kTruncatedNativeStack), "[Truncated Native Stack]_[pe]");
  EXPECT_EQ(SampleErrorFrame(PYPERF_ERROR_THREAD_STATE), "[Sample Error THREAD_STATE]_[pe]");
  EXPECT_EQ(SampleErrorFrame(PYPERF_ERROR_NO_OFFSETS), "[Sample Error NO_OFFSETS]_[pe]");
  EXPECT_EQ(SampleErrorFrame(PYPERF_ERROR_NO_INTERPRETER), "[Sample Error NO_INTERPRETER]_[pe]");
  EXPECT_EQ(SampleErrorFrame(PYPERF_ERROR_TAIL_CALL), "[Sample Error TAIL_CALL]_[pe]");
  EXPECT_EQ(SampleErrorFrame(200), "[Sample Error UNKNOWN]_[pe]");
  EXPECT_EQ(NativeStackErrorFrame("unw_step (no unwind info)"),
            "[Native Stack Error: unw_step (no unwind info)]_[pe]");
}

TEST(FrameSpelling, SeparatorsAndLineBreaksInTextBecomeUnderscores) {
  EXPECT_EQ(SpellFrame(FrameKind::kNative, "a;b\nc\rd"), "a_b_c_d_[pn]");
  std::string out = "kept;";
  AppendFrameText("x;y", &out);
  EXPECT_EQ(out, "kept;x_y");
}

// gProfiler reads the file with Python's str.splitlines(): every character
// it breaks a line at becomes one '_', multi-byte ones included.
TEST(FrameSpelling, EveryLineBreakPythonSplitsAtBecomesOneUnderscore) {
  EXPECT_EQ(SpellFrame(FrameKind::kNative,
                       "a\vb\fc\x1c"
                       "d\x1d"
                       "e\x1e"
                       "f"),
            "a_b_c_d_e_f_[pn]");
  // U+0085, U+2028, U+2029 in UTF-8; U+2027 and U+00A0 are not breaks.
  EXPECT_EQ(SpellFrame(FrameKind::kNative,
                       "a\xc2\x85"
                       "b\xe2\x80\xa8"
                       "c\xe2\x80\xa9"
                       "d"),
            "a_b_c_d_[pn]");
  EXPECT_EQ(SpellFrame(FrameKind::kNative,
                       "a\xe2\x80\xa7"
                       "b\xc2\xa0"
                       "c"),
            "a\xe2\x80\xa7"
            "b\xc2\xa0"
            "c_[pn]");
}

// Starts a sample of comm "python3", 16 bytes as the kernel gives it.
void StartPython3(StackText* stack, uint32_t pid, uint32_t tid) {
  const char comm[16] = "python3";
  stack->Start(comm, sizeof(comm), pid, tid);
}

// A sample with nothing to show still has a frame: gProfiler cannot read a
// line without one.
TEST(StackText, ASampleWithoutFramesGetsTheNoFramesMarker) {
  StackText stack;
  StartPython3(&stack, 1, 2);
  stack.EnsureFrame();
  EXPECT_EQ(stack.text(), "python3-1/2;[No Frames]_[pe]");
  StartPython3(&stack, 1, 2);
  stack.Add(FrameKind::kKernel, "vfs_read");
  stack.EnsureFrame();
  EXPECT_EQ(stack.text(), "python3-1/2;vfs_read_[k]");
}

TEST(StackText, FirstTokenIsCommPidAndTid) {
  StackText stack;
  StartPython3(&stack, 1234, 1240);
  EXPECT_EQ(stack.text(), "python3-1234/1240");
  // A stack is reused: Start forgets the previous sample.
  stack.Add(FrameKind::kKernel, "vfs_read");
  StartPython3(&stack, 7, 8);
  EXPECT_EQ(stack.text(), "python3-7/8");
}

TEST(StackText, CommIsEscapedAndMadeUtf8) {
  StackText stack;
  const char semicolon[16] = "a;b";
  stack.Start(semicolon, sizeof(semicolon), 1, 2);
  EXPECT_EQ(stack.text(), "a_b-1/2");
  // The kernel keeps 16 bytes without a NUL when the name fills them.
  const char full[16] = {'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h',
                         'i', 'j', 'k', 'l', 'm', 'n', 'o', 'p'};
  stack.Start(full, sizeof(full), 1, 2);
  EXPECT_EQ(stack.text(), "abcdefghijklmnop-1/2");
  const char latin1[16] = "gr\xf6\xdf;e";
  stack.Start(latin1, sizeof(latin1), 1, 2);
  EXPECT_EQ(stack.text(), "gr\xEF\xBF\xBD\xEF\xBF\xBD_e-1/2");
}

TEST(StackText, FramesFollowTheFirstTokenRootFirst) {
  StackText stack;
  const char comm[16] = "app";
  stack.Start(comm, sizeof(comm), 10, 11);
  stack.AddMarker(kTruncatedPythonStack);
  stack.AddSampleError(PYPERF_ERROR_TAIL_CALL);
  stack.AddSpelled("m.f (/m.py:3)_[p]");
  stack.Add(FrameKind::kNative, "read");
  stack.Add(FrameKind::kKernel, "do_syscall_64");
  stack.AddKernelAddress(0xffffffff81000abcull);
  EXPECT_EQ(stack.text(),
            "app-10/11;[Truncated Python Stack]_[pe];[Sample Error TAIL_CALL]_[pe];"
            "m.f (/m.py:3)_[p];read_[pn];do_syscall_64_[k];0xffffffff81000abc_[k]");
}

NativeFrame Frame(const std::string& name, bool error = false) {
  NativeFrame f;
  f.name = name;
  f.error = error;
  return f;
}

TEST(StackText, NativeFramesAreAddedRootFirst) {
  StackText stack;
  stack.Start("p", 2, 1, 1);
  NativeUnwindResult result;
  result.reached_stop = true;
  stack.AddNativeFrames({Frame("leaf"), Frame("middle"), Frame("_PyEval_EvalFrameDefault")},
                        result);
  EXPECT_EQ(stack.text(), "p-1/1;_PyEval_EvalFrameDefault_[pn];middle_[pn];leaf_[pn]");
}

TEST(StackText, AFailedNativeUnwindEndsWithAMarker) {
  // unw_step failed after two frames: the marker stands where the unwind
  // stopped, on the root side of the frames it found.
  StackText stack;
  stack.Start("p", 2, 1, 1);
  NativeUnwindResult result;
  result.error = true;
  stack.AddNativeFrames(
      {Frame("leaf"), Frame("caller"), Frame("unw_step (unspecified; error)", true)}, result);
  EXPECT_EQ(stack.text(),
            "p-1/1;[Native Stack Error: unw_step (unspecified_ error)]_[pe];caller_[pn];leaf_[pn]");
}

TEST(StackText, ANativeUnwindCutAtItsLimitStartsWithAMarker) {
  StackText stack;
  stack.Start("p", 2, 1, 1);
  NativeUnwindResult result;
  result.truncated = true;
  stack.AddNativeFrames({Frame("leaf"), Frame("caller")}, result);
  EXPECT_EQ(stack.text(), "p-1/1;[Truncated Native Stack]_[pe];caller_[pn];leaf_[pn]");
}

// The real unwinder's failures come out as markers: a snapshot without
// registers, and one of a process that no longer exists.
TEST(StackText, UnwinderFailuresPrintAsNativeStackErrors) {
  NativeUnwinder unwinder;
  std::vector<NativeFrame> frames;
  StackText stack;

  NativeSnapshot no_registers;
  no_registers.pid = getpid();
  NativeUnwindResult result = unwinder.Unwind(no_registers, &frames);
  stack.Start("p", 2, 1, 1);
  stack.AddNativeFrames(frames, result);
  EXPECT_EQ(stack.text(), "p-1/1;[Native Stack Error: no registers]_[pe]");

  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  NativeSnapshot gone;
  gone.pid = child;
  gone.ip = 0x401000;
  gone.sp = 0x7ffc0000;
  result = unwinder.Unwind(gone, &frames);
  stack.Start("p", 2, 1, 1);
  stack.AddNativeFrames(frames, result);
  EXPECT_TRUE(result.error);
  const std::string& text = stack.text();
  EXPECT_EQ(text.rfind("p-1/1;[Native Stack Error: reading process mappings (", 0), 0u) << text;
  EXPECT_EQ(text.substr(text.size() - 7), ")]_[pe]") << text;
}

// The encoders of the other formats read stacks back with ParseStackText: it
// must give back exactly what StackText put in.
TEST(ParseStackText, GivesBackWhatStackTextBuilt) {
  StackText s;
  s.Start("my-comm/x", 16, 123, 456);
  s.Add(FrameKind::kPython, "app.main (/srv/app.py:3)");
  s.Add(FrameKind::kNative, "_PyEval_EvalFrameDefault");
  s.AddSampleError(PYPERF_ERROR_THREAD_STATE);
  s.Add(FrameKind::kKernel, "do_syscall_64");
  StackHead head;
  std::vector<SpelledFrame> frames;
  ASSERT_TRUE(ParseStackText(s.text(), &head, &frames)) << s.text();
  EXPECT_EQ(head.comm, "my-comm/x");
  EXPECT_EQ(head.pid, 123u);
  EXPECT_EQ(head.tid, 456u);
  ASSERT_EQ(frames.size(), 4u);
  EXPECT_EQ(frames[0].kind, FrameKind::kPython);
  EXPECT_EQ(frames[0].text, "app.main (/srv/app.py:3)");
  EXPECT_EQ(frames[1].kind, FrameKind::kNative);
  EXPECT_EQ(frames[1].text, "_PyEval_EvalFrameDefault");
  EXPECT_EQ(frames[2].kind, FrameKind::kMarker);
  EXPECT_EQ(frames[2].text, "[Sample Error THREAD_STATE]");
  EXPECT_EQ(frames[3].kind, FrameKind::kKernel);
  EXPECT_EQ(frames[3].text, "do_syscall_64");
}

TEST(ParseStackText, RefusesWhatStackTextCannotHaveBuilt) {
  StackHead head;
  std::vector<SpelledFrame> frames;
  EXPECT_FALSE(ParseStackText("", &head, &frames));
  EXPECT_FALSE(ParseStackText("comm;f_[p]", &head, &frames));          // no pid/tid
  EXPECT_FALSE(ParseStackText("comm-1/x;f_[p]", &head, &frames));      // tid not a number
  EXPECT_FALSE(ParseStackText("comm-1/99999999999", &head, &frames));  // tid too large
  EXPECT_FALSE(ParseStackText("comm-1/2;no_suffix", &head, &frames));  // a frame without kind
  EXPECT_TRUE(ParseStackText("comm-1/2", &head, &frames));             // no frame at all
  EXPECT_TRUE(frames.empty());
}

}  // namespace
}  // namespace pyperf
