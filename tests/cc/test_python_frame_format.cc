// Tests for how Python frames are spelled in collapsed stacks.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "FrameSpelling.h"
#include "PythonFrameFormat.h"

namespace pyperf {
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

TEST(FormatPythonFrame, MethodOfAClass) {
  EXPECT_EQ(FormatPythonFrame("/usr/lib/python3.11/json/decoder.py", "decode", "JSONDecoder", 332),
            Python("json.decoder.JSONDecoder.decode (/usr/lib/python3.11/json/decoder.py:332)"));
}

TEST(FormatPythonFrame, PlainFunction) {
  EXPECT_EQ(FormatPythonFrame("/app/site-packages/requests/api.py", "get", "", 62),
            Python("requests.api.get (/app/site-packages/requests/api.py:62)"));
  EXPECT_EQ(FormatPythonFrame("/work/x/app.py", "<module>", "", 1),
            Python("work.x.app.<module> (/work/x/app.py:1)"));
}

TEST(FormatPythonFrame, EmptyFileDropsTheModulePrefix) {
  EXPECT_EQ(FormatPythonFrame("", "f", "", 0), Python("f (:0)"));
}

TEST(FormatPythonFrame, CharactersThatBreakCollapsedStacksAreReplaced) {
  EXPECT_EQ(FormatPythonFrame("/a;b/c.py", "f\n", "", 3), Python("a_b.c.f_ (/a_b/c.py:3)"));
}

std::string WithoutSuffix(const std::string& frame) {
  return frame.substr(0, frame.size() - kPythonSuffix.size());
}

TEST(ParsePythonFrameText, GivesBackNameFileAndLine) {
  PythonFrameParts parts;
  std::string text = WithoutSuffix(
      FormatPythonFrame("/usr/lib/python3.11/json/decoder.py", "decode", "JSONDecoder", 332));
  ASSERT_TRUE(ParsePythonFrameText(text, &parts)) << text;
  EXPECT_EQ(parts.name, "json.decoder.JSONDecoder.decode");
  EXPECT_EQ(parts.file, "/usr/lib/python3.11/json/decoder.py");
  EXPECT_EQ(parts.line, 332);
}

// A path holding " (" and ":" is split where FormatPythonFrame joined it.
TEST(ParsePythonFrameText, APathWithParenthesesAndColonsSplitsRight) {
  for (const std::string& file :
       {std::string("/srv/My Project (copy)/a:b.py"), std::string("/x (1)/y (2)/z.py"),
        std::string("<string>"), std::string("")}) {
    SCOPED_TRACE(file);
    PythonFrameParts parts;
    std::string text = WithoutSuffix(FormatPythonFrame(file, "run (x)", "", 7));
    ASSERT_TRUE(ParsePythonFrameText(text, &parts)) << text;
    EXPECT_EQ(parts.file, file);
    EXPECT_EQ(parts.line, 7);
    EXPECT_EQ(text.substr(0, parts.name.size()), parts.name);
    EXPECT_EQ(parts.name.substr(parts.name.size() - 7), "run (x)");
  }
}

TEST(ParsePythonFrameText, RefusesTextsWithoutFileAndLine) {
  PythonFrameParts parts;
  EXPECT_FALSE(ParsePythonFrameText("", &parts));
  EXPECT_FALSE(ParsePythonFrameText("f", &parts));
  EXPECT_FALSE(ParsePythonFrameText("f (a.py)", &parts));
  EXPECT_FALSE(ParsePythonFrameText("f (a.py:x)", &parts));
  EXPECT_FALSE(ParsePythonFrameText("other.f (/srv/a.py:3)", &parts));  // module does not match
}

}  // namespace
}  // namespace pyperf
