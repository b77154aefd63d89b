// Tests for how Python frames are spelled in collapsed stacks: the module a
// file is named by (PythonModuleName), and the whole frame as StackSpeller
// spells it.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "FrameSpelling.h"
#include "PythonFrameFormat.h"
#include "support/test_stack.h"

namespace ebpf::pyperf {
namespace {

// The text of a Python frame with the suffix FrameSpelling gives it.
std::string Python(const std::string& text) { return text + std::string(kPythonSuffix); }

// PythonModuleName of each file, against the module expected.
void ExpectModuleNames(const std::vector<std::pair<std::string, std::string>>& cases) {
  for (const auto& [file, module] : cases) EXPECT_EQ(PythonModuleName(file), module) << file;
}

TEST(PythonModuleName, StripsTheStandardLibraryDirectory) {
  ExpectModuleNames({
      {"/usr/lib/python3.11/json/decoder.py", "json.decoder"},
      {"/root/.pyenv/versions/3.12.1/lib/python3.12/threading.py", "threading"},
      {"/usr/lib64/python3.9/os.py", "os"},
      {"/opt/py/lib/python3.13t/json/decoder.py", "json.decoder"},
      {"/usr/lib/python2.7/os.py", "os"},
  });
}

TEST(PythonModuleName, StripsPackageDirectories) {
  ExpectModuleNames({
      {"/app/site-packages/requests/api.py", "requests.api"},
      {"/usr/lib/python3/dist-packages/apt/cache.py", "apt.cache"},
      // A virtualenv's site-packages lies inside lib/pythonX.Y: the last one wins.
      {"/venv/lib/python3.11/site-packages/flask/app.py", "flask.app"},
  });
}

TEST(PythonModuleName, ScriptOutsideLibrariesIsNamedByItsPath) {
  ExpectModuleNames({
      {"/work/x/app.py", "work.x.app"},
      {"app.py", "app"},
      {"./tools/run.py", "tools.run"},
  });
}

TEST(PythonModuleName, PackageInitIsNamedAfterThePackage) {
  ExpectModuleNames({
      {"/usr/lib/python3.11/json/__init__.py", "json"},
      {"__init__.py", "__init__"},
  });
}

TEST(PythonModuleName, LookalikeDirectoriesAreNotLibraryDirectories) {
  ExpectModuleNames({
      {"/home/u/python3.11/x.py", "home.u.python3.11.x"},
      {"/srv/lib/pythonic/x.py", "srv.lib.pythonic.x"},
  });
}

TEST(PythonModuleName, SpecialFileNames) {
  ExpectModuleNames({
      {"<frozen importlib._bootstrap>", "importlib._bootstrap"},
      {"<string>", "<string>"},
      {"", ""},
      {"/x/ext.pyx", "x.ext.pyx"},
  });
}

// The collapsed spelling of a Python frame of `qualified_name` in `file`
// (StackSpeller, FrameSpelling.h): what gProfiler reads.
std::string Spelled(const std::string& file, const std::string& qualified_name, int line) {
  const std::string spelled =
      pyperf_test::Collapsed(pyperf_test::TestStack("p", 1, 1).Python(qualified_name, file, line));
  return spelled.substr(spelled.find(kFrameSeparator) + 1);
}

TEST(PythonFrameSpelling, MethodOfAClass) {
  EXPECT_EQ(Spelled("/usr/lib/python3.11/json/decoder.py", "JSONDecoder.decode", 332),
            Python("json.decoder.JSONDecoder.decode (/usr/lib/python3.11/json/decoder.py:332)"));
}

TEST(PythonFrameSpelling, PlainFunction) {
  EXPECT_EQ(Spelled("/app/site-packages/requests/api.py", "get", 62),
            Python("requests.api.get (/app/site-packages/requests/api.py:62)"));
  EXPECT_EQ(Spelled("/work/x/app.py", "<module>", 1),
            Python("work.x.app.<module> (/work/x/app.py:1)"));
}

TEST(PythonFrameSpelling, EmptyFileDropsTheModulePrefix) {
  EXPECT_EQ(Spelled("", "f", 0), Python("f (:0)"));
}

TEST(PythonFrameSpelling, SpecialFilesAreNamedByTheirModule) {
  EXPECT_EQ(Spelled("/usr/lib/python3.11/json/__init__.py", "loads", 346),
            Python("json.loads (/usr/lib/python3.11/json/__init__.py:346)"));
  EXPECT_EQ(Spelled("<frozen importlib._bootstrap>", "_find_and_load", 1360),
            Python("importlib._bootstrap._find_and_load (<frozen importlib._bootstrap>:1360)"));
  EXPECT_EQ(Spelled("<string>", "f", 1), Python("<string>.f (<string>:1)"));
}

// A path holding " (" and ":" is written as it is: nothing parses it back.
TEST(PythonFrameSpelling, APathWithParenthesesAndColonsIsKept) {
  EXPECT_EQ(Spelled("/srv/My Project (copy)/a:b.py", "run", 7),
            Python("srv.My Project (copy).a:b.run (/srv/My Project (copy)/a:b.py:7)"));
}

TEST(PythonFrameSpelling, CharactersThatBreakCollapsedStacksAreReplaced) {
  EXPECT_EQ(Spelled("/a;b/c.py", "f\n", 3), Python("a_b.c.f_ (/a_b/c.py:3)"));
}

}  // namespace
}  // namespace ebpf::pyperf
