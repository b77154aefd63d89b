// Tests for how Python frames are spelled in collapsed stacks.
#include <gtest/gtest.h>

#include "FrameSpelling.h"
#include "PythonFrameFormat.h"

namespace pyperf {
namespace {

// The text of a Python frame with the suffix FrameSpelling gives it.
std::string Python(const std::string& text) { return text + std::string(kPythonSuffix); }

TEST(PythonModuleName, StripsTheStandardLibraryDirectory) {
  EXPECT_EQ(PythonModuleName("/usr/lib/python3.11/json/decoder.py"), "json.decoder");
  EXPECT_EQ(PythonModuleName("/root/.pyenv/versions/3.12.1/lib/python3.12/threading.py"),
            "threading");
  EXPECT_EQ(PythonModuleName("/usr/lib64/python3.9/os.py"), "os");
  EXPECT_EQ(PythonModuleName("/opt/py/lib/python3.13t/json/decoder.py"), "json.decoder");
  EXPECT_EQ(PythonModuleName("/usr/lib/python2.7/os.py"), "os");
}

TEST(PythonModuleName, StripsPackageDirectories) {
  EXPECT_EQ(PythonModuleName("/app/site-packages/requests/api.py"), "requests.api");
  EXPECT_EQ(PythonModuleName("/usr/lib/python3/dist-packages/apt/cache.py"), "apt.cache");
  // A virtualenv's site-packages lies inside lib/pythonX.Y: the last one wins.
  EXPECT_EQ(PythonModuleName("/venv/lib/python3.11/site-packages/flask/app.py"), "flask.app");
}

TEST(PythonModuleName, ScriptOutsideLibrariesIsNamedByItsPath) {
  EXPECT_EQ(PythonModuleName("/work/x/app.py"), "work.x.app");
  EXPECT_EQ(PythonModuleName("app.py"), "app");
  EXPECT_EQ(PythonModuleName("./tools/run.py"), "tools.run");
}

TEST(PythonModuleName, PackageInitIsNamedAfterThePackage) {
  EXPECT_EQ(PythonModuleName("/usr/lib/python3.11/json/__init__.py"), "json");
  EXPECT_EQ(PythonModuleName("__init__.py"), "__init__");
}

TEST(PythonModuleName, LookalikeDirectoriesAreNotLibraryDirectories) {
  EXPECT_EQ(PythonModuleName("/home/u/python3.11/x.py"), "home.u.python3.11.x");
  EXPECT_EQ(PythonModuleName("/srv/lib/pythonic/x.py"), "srv.lib.pythonic.x");
}

TEST(PythonModuleName, SpecialFileNames) {
  EXPECT_EQ(PythonModuleName("<frozen importlib._bootstrap>"), "importlib._bootstrap");
  EXPECT_EQ(PythonModuleName("<string>"), "<string>");
  EXPECT_EQ(PythonModuleName(""), "");
  EXPECT_EQ(PythonModuleName("/x/ext.pyx"), "x.ext.pyx");
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

}  // namespace
}  // namespace pyperf
