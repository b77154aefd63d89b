// End-to-end test of names at the edge of PyPerf's BPF buffers: a class name
// of 32 bytes with its NUL, a function name of 64 bytes, a file name of 256
// (PyPerfBpfShared.h). long_names.py runs a chain with a name of each kind
// that just fits and one a byte too long; a name that fits prints whole and
// unmarked, a longer one keeps exactly the buffer's bytes and ends with
// "[truncated]" (README, "Text"): never silently cut, never cut a byte early.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "support/collapsed.h"
#include "support/e2e.h"
#include "support/test_support.h"

namespace pyperf_test {
namespace {

// What the buffers hold (README): bytes of the name as the process keeps it
// (one per character here: every name is ASCII).
constexpr size_t kClassBytes = 31;  // 32 with the terminating NUL
constexpr size_t kFunctionBytes = 64;
constexpr size_t kFileBytes = 256;
constexpr char kMarker[] = "[truncated]";

// `name` as PyPerf must print it from a buffer of `bytes`.
std::string AsPrinted(const std::string& name, size_t bytes) {
  return name.size() <= bytes ? name : name.substr(0, bytes) + kMarker;
}

// long_names.py's path of `length` bytes: BASE/<letter...>.py.
std::string PathOfLength(const std::string& base, char letter, size_t length) {
  return base + "/" + std::string(length - base.size() - 4, letter) + ".py";
}

// The README's module of a file outside any library directory: without the
// leading '/' and a ".py" suffix, each '/' a '.'.
std::string ModuleOf(std::string file) {
  file = file.substr(1);
  if (file.size() > 3 && file.compare(file.size() - 3, 3, ".py") == 0) file.resize(file.size() - 3);
  std::replace(file.begin(), file.end(), '/', '.');
  return file;
}

std::string Frame(const std::string& file, const std::string& class_name,
                  const std::string& function, int line) {
  return ModuleOf(file) + "." + (class_name.empty() ? "" : class_name + ".") + function + " (" +
         file + ":" + std::to_string(line) + ")" + std::string(ebpf::pyperf::kPythonSuffix);
}

class LongNamesTest : public ::testing::TestWithParam<std::string> {};

TEST_P(LongNamesTest, NamesPastTheBuffersAreMarkedAndNamesThatFitAreWhole) {
  auto python = FindInterpreter(GetParam());
  if (!python) PYPERF_SKIP_OR_FAIL("interpreter " + GetParam() + " is not installed");
  PYPERF_REQUIRE_BPF();
  TempDir dir;
  ASSERT_LE(dir.path().size(), 200u) << "long_names.py needs room for its file names";
  auto workload = StartWorkload(*python, "long_names.py", {dir.path()});
  ASSERT_NE(workload, nullptr);
  auto pyperf = StartPyPerf(
      {"-F", "199", "-d", "3", "--line-numbers", "first", "-p", std::to_string(workload->pid())});
  CollapsedProfile profile = FinishPyPerf(*pyperf, "PyPerf", seconds(90)).profile;
  ASSERT_TRUE(workload->Running()) << "the workload died; stderr:\n" << workload->Stderr();

  // The names of long_names.py, spelled out again.
  const std::string fits_file = PathOfLength(dir.path(), 'a', kFileBytes);
  const std::string long_file =
      AsPrinted(PathOfLength(dir.path(), 'b', kFileBytes + 1), kFileBytes);
  const std::string fits_function = "f64_" + std::string(60, 'f');
  const std::string long_function = AsPrinted("f65_" + std::string(61, 'g'), kFunctionBytes);
  const std::string fits_class = "C31_" + std::string(27, 'h');
  const std::string long_class = AsPrinted("C32_" + std::string(28, 'i'), kClassBytes);
  ASSERT_EQ(fits_file.size(), kFileBytes);
  ASSERT_EQ(fits_function.size(), kFunctionBytes);
  ASSERT_EQ(fits_class.size(), kClassBytes);
  const std::vector<std::string> chain = {
      Frame(fits_file, "", fits_function, 1),
      Frame(long_file, "", long_function, 1),
      Frame(fits_file, fits_class, "method", 5),
      Frame(long_file, long_class, "spin", 5),
  };

  // Every sample runs the chain (entered before "ready"), the leaf looping
  // forever: all but an error-marked sample or so must end with it exactly.
  SCOPED_TRACE("the chain expected:\n  " + chain[0] + "\n  " + chain[1] + "\n  " + chain[2] +
               "\n  " + chain[3]);
  ExpectShareOfSamples(
      profile.OfPid(workload->pid()),
      [&](const CollapsedLine& line) {
        auto frames = FramesOfKind(line, FrameKind::kPython);
        return frames.size() >= chain.size() &&
               std::equal(chain.begin(), chain.end(), frames.end() - chain.size());
      },
      95.0, "end with the chain of names at and past the buffers' sizes");
}

// 2.7 copies UTF-8 bytes, 3.x PEP 393 strings; 3.13 reads its offsets from
// the interpreter's _Py_DebugOffsets.
INSTANTIATE_TEST_SUITE_P(Interpreters, LongNamesTest,
                         ::testing::Values(std::string("2.7"), std::string("3.11"),
                                           std::string("3.13")),
                         [](const auto& info) { return SpecTestName(info.param); });

}  // namespace
}  // namespace pyperf_test
