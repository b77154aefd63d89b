// Tests of FrameSpelling: the spellings gProfiler reads (written out here as
// literals, the one place the tests do not take them from FrameSpelling.h),
// the escaping of outside text, a sample's collapsed line as StackSpeller
// spells it, and the names people read in the other formats.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "FrameSpelling.h"
#include "PyPerfBpfShared.h"
#include "Sample.h"
#include "support/test_stack.h"

namespace ebpf::pyperf {
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

using pyperf_test::Collapsed;
using pyperf_test::Intern;
using pyperf_test::TestStack;

// The marker texts a sample's frames hold: the frames above without their
// suffix, and not escaped (the collapsed text escapes them where it spells them).
TEST(FrameSpelling, MarkerTextsAreTheirFramesWithoutTheSuffix) {
  EXPECT_EQ(SampleErrorText(PYPERF_ERROR_FRAME_CYCLE), "[Sample Error FRAME_CYCLE]");
  EXPECT_EQ(NativeStackErrorText("unw_step (unspecified; error)"),
            "[Native Stack Error: unw_step (unspecified; error)]");
  const uint8_t errors[] = {PYPERF_ERROR_NO_OFFSETS,
                            PYPERF_ERROR_NO_INTERPRETER,
                            PYPERF_ERROR_THREAD_STATE,
                            PYPERF_ERROR_TAIL_CALL,
                            PYPERF_ERROR_FRAME_CYCLE,
                            PYPERF_ERROR_FRAME_UNREADABLE,
                            200};
  for (uint8_t error : errors) {
    EXPECT_EQ(SpellFrame(FrameKind::kMarker, SampleErrorText(error)), SampleErrorFrame(error));
  }
  EXPECT_EQ(SpellFrame(FrameKind::kMarker, NativeStackErrorText("a; b")),
            NativeStackErrorFrame("a; b"));
}

TEST(StackSpeller, FirstTokenIsCommPidAndTid) {
  EXPECT_EQ(Collapsed(TestStack("python3", 1234, 1240).Kernel("vfs_read")),
            "python3-1234/1240;vfs_read_[k]");
  // The thread alone, as the line starts.
  FrameDictionary dictionary;
  Sample sample = Intern(TestStack("my-comm/x", 7, 8), &dictionary);
  StackSpeller speller(dictionary);
  std::string out = "kept";
  speller.AppendThread(sample, &out);
  EXPECT_EQ(out, "keptmy-comm/x-7/8");
}

TEST(StackSpeller, CommIsEscaped) {
  EXPECT_EQ(Collapsed(TestStack("a;b\nc", 1, 2).Kernel("f")), "a_b_c-1/2;f_[k]");
}

// Every kind of frame, root first, each spelled with its suffix.
TEST(StackSpeller, FramesFollowTheFirstTokenRootFirst) {
  TestStack stack("app", 10, 11);
  stack.Marker(std::string(kTruncatedPythonStack))
      .Marker(SampleErrorText(PYPERF_ERROR_TAIL_CALL))
      .Python("main", "/m.py", 3)
      .Python("Handler.run", "/usr/lib/python3.11/json/decoder.py", 40)
      .Marker(NativeStackErrorText("unw_step (unspecified; error)"))
      .Native("read", "/lib/libc.so.6", "0123abcd", 0x1234)
      .Native("unknown_file")
      .Kernel("do_syscall_64")
      .Kernel("0xffffffff81000abc");
  EXPECT_EQ(Collapsed(stack),
            "app-10/11;[Truncated Python Stack]_[pe];[Sample Error TAIL_CALL]_[pe];"
            "m.main (/m.py:3)_[p];"
            "json.decoder.Handler.run (/usr/lib/python3.11/json/decoder.py:40)_[p];"
            "[Native Stack Error: unw_step (unspecified_ error)]_[pe];read_[pn];"
            "unknown_file_[pn];do_syscall_64_[k];0xffffffff81000abc_[k]");
}

// The collapsed text names no native file or address: gProfiler reads the
// symbol alone.
TEST(StackSpeller, NativeFramesAreSpelledByTheirSymbolAlone) {
  EXPECT_EQ(Collapsed(TestStack("p", 1, 1).Native("memcpy", "/lib/libc.so.6", "ab", 0x1234)),
            Collapsed(TestStack("p", 1, 1).Native("memcpy", "/lib64/libc.so.6", "cd", 0x99)));
}

TEST(StackSpeller, SeparatorsAndLineBreaksInNamesBecomeUnderscores) {
  EXPECT_EQ(Collapsed(TestStack("p", 1, 1)
                          .Python("C.f;g\n", "/a;b/c\xe2\x80\xa8.py", 3)
                          .Native("x;y\rz")
                          .Kernel("k\v")
                          .Marker("[m;\x1e]")),
            "p-1/1;a_b.c_.C.f_g_ (/a_b/c_.py:3)_[p];x_y_z_[pn];k__[k];[m__]_[pe]");
}

TEST(StackSpeller, AppendCollapsedFrameSpellsOneFrame) {
  FrameDictionary dictionary;
  Sample sample =
      Intern(TestStack("p", 1, 1).Python("f", "/srv/app.py", 7).Kernel("k"), &dictionary);
  StackSpeller speller(dictionary);
  std::string out = "kept;";
  speller.AppendCollapsedFrame(sample.frames[0], &out);
  EXPECT_EQ(out, "kept;srv.app.f (/srv/app.py:7)_[p]");
  out.clear();
  speller.AppendCollapsedFrame(sample.frames[1], &out);
  EXPECT_EQ(out, "k_[k]");
}

struct Names {
  std::string full, display;
};

// FullName and DisplayName of the first frame of `stack`.
Names NamesOf(const TestStack& stack) {
  FrameDictionary dictionary;
  Sample sample = Intern(stack, &dictionary);
  StackSpeller speller(dictionary);
  return {std::string(speller.FullName(sample.frames[0])),
          std::string(speller.DisplayName(sample.frames[0]))};
}

// A Python frame of `qualified_name` in `file`.
Names PythonNames(const std::string& file, const std::string& qualified_name) {
  return NamesOf(TestStack("p", 1, 1).Python(qualified_name, file, 1));
}

struct PythonNamesCase {
  std::string file, qualified_name;
  Names expected;
};

void ExpectPythonNames(const std::vector<PythonNamesCase>& cases) {
  for (const auto& [file, qualified_name, expected] : cases) {
    const Names names = PythonNames(file, qualified_name);
    EXPECT_EQ(names.display, expected.display) << file;
    EXPECT_EQ(names.full, expected.full) << file;
  }
}

// The flame graph shows a box by its display name: the file's base name and
// the qualified name, not the script's whole directory path.
TEST(StackSpeller, DisplayNameIsTheFileBaseNameAndTheQualifiedName) {
  ExpectPythonNames({
      {"/srv/bcc-pyperf/examples/cpp/pyperf/demo/demo_workload.py",
       "RequestHandler.handle",
       {"srv.bcc-pyperf.examples.cpp.pyperf.demo.demo_workload.RequestHandler.handle",
        "demo_workload.RequestHandler.handle"}},
      {"/usr/lib/python3.11/json/decoder.py",
       "JSONDecoder.decode",
       {"json.decoder.JSONDecoder.decode", "decoder.JSONDecoder.decode"}},
  });
}

TEST(StackSpeller, DisplayNameOfSpecialFiles) {
  ExpectPythonNames({
      // A package's __init__.py is named by its package, as Python names it.
      {"/srv/pkg/__init__.py", "f", {"srv.pkg.f", "pkg.f"}},
      {"<frozen importlib._bootstrap>", "f", {"importlib._bootstrap.f", "_bootstrap.f"}},
      {"<string>", "f", {"<string>.f", "<string>.f"}},
      {"", "f", {"f", "f"}},
  });
}

// Names are escaped as the collapsed text escapes them (';' and line breaks
// become '_'): every format shows a frame as gProfiler does.
TEST(StackSpeller, NamesOfOtherFramesAreTheirTextEscaped) {
  const struct {
    TestStack stack;
    std::string expected;
  } cases[] = {
      {TestStack("p", 1, 1).Native("a;b", "/lib/x.so", "", 0x10), "a_b"},
      {TestStack("p", 1, 1).Kernel("k\nl\xe2\x80\xa8m"), "k_l_m"},
      {TestStack("p", 1, 1).Marker(std::string(kLostSymbol)), std::string(kLostSymbol)},
  };
  for (const auto& [stack, expected] : cases) {
    Names names = NamesOf(stack);
    EXPECT_EQ(names.full, expected);
    EXPECT_EQ(names.display, expected);
  }
  const Names python = PythonNames("/a;b.py", "f\n");
  EXPECT_EQ(python.display, "a_b.f_");
  EXPECT_EQ(python.full, "a_b.f_");
}

// Text: a comm or a Python file, escaped the same way.
TEST(StackSpeller, TextIsTheDictionaryStringEscaped) {
  FrameDictionary dictionary;
  Sample sample = Intern(TestStack("a;b\rc", 1, 1).Python("f", "/x;y\n.py", 1), &dictionary);
  StackSpeller speller(dictionary);
  EXPECT_EQ(speller.Text(sample.comm), "a_b_c");
  EXPECT_EQ(speller.Text(sample.frames[0].file), "/x_y_.py");
  // Asked again (the escaped copy is kept), and a string that needs nothing.
  EXPECT_EQ(speller.Text(sample.comm), "a_b_c");
  EXPECT_EQ(speller.Text(sample.frames[0].name), "f");
}

// One speller spells a whole dump: a name met in two files is two names.
TEST(StackSpeller, OneNameInTwoFilesIsSpelledForEach) {
  FrameDictionary dictionary;
  Sample sample = Intern(TestStack("p", 1, 1)
                             .Python("run", "/srv/a.py", 1)
                             .Python("run", "/srv/b.py", 2)
                             .Python("run", "/srv/a.py", 3),
                         &dictionary);
  StackSpeller speller(dictionary);
  EXPECT_EQ(speller.FullName(sample.frames[0]), "srv.a.run");
  EXPECT_EQ(speller.FullName(sample.frames[1]), "srv.b.run");
  EXPECT_EQ(speller.DisplayName(sample.frames[2]), "a.run");
  std::string out;
  speller.AppendCollapsedStack(sample, &out);
  EXPECT_EQ(out,
            "p-1/1;srv.a.run (/srv/a.py:1)_[p];srv.b.run (/srv/b.py:2)_[p];"
            "srv.a.run (/srv/a.py:3)_[p]");
}

}  // namespace
}  // namespace ebpf::pyperf
