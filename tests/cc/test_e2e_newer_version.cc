// End-to-end test of a CPython newer than every one PyPerf knows: it is
// refused with one warning line naming its version, never profiled with a
// neighbouring version's layout. The newest interpreter on the machine,
// Debian sid's python3.15, is copied inside the sid root with its Py_Version
// (the exported `const unsigned long` PyPerf reads the version from) set to
// 3.16.0 final, and run there as a container: to PyPerf it is a 3.16 whose
// every other byte is a 3.15's, the case where a guess would be easiest and
// wrongest. The process itself runs as before (Py_Version is informational).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "elf_file.h"
#include "support/collapsed.h"
#include "support/e2e.h"
#include "support/python_roots.h"
#include "support/test_support.h"

namespace pyperf_test {
namespace {

constexpr uint64_t kPyVersion316 = 0x031000f0;  // 3.16.0, release level final

// Writes `value` over the Py_Version symbol of the ELF file at `path`, in the
// symbol's own width; false (with a failure) when the file has no such symbol.
bool SetPyVersion(const std::string& path, uint64_t value) {
  auto elf = ebpf::ElfFile::Open(path);
  if (!elf.ok()) {
    ADD_FAILURE() << elf.error();
    return false;
  }
  auto symbol = elf->FindSymbol("Py_Version");
  if (!symbol || (symbol->size != 4 && symbol->size != 8)) {
    ADD_FAILURE() << "no 4- or 8-byte Py_Version in " << path;
    return false;
  }
  std::optional<uint64_t> file_offset;
  for (const auto& segment : elf->load_segments()) {
    if (symbol->value >= segment.vaddr &&
        symbol->value + symbol->size <= segment.vaddr + segment.filesz)
      file_offset = symbol->value - segment.vaddr + segment.offset;
  }
  if (!file_offset) {
    ADD_FAILURE() << "Py_Version of " << path << " is in no loaded segment";
    return false;
  }
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekp(static_cast<std::streamoff>(*file_offset));
  for (uint64_t i = 0; i < symbol->size; ++i)
    file.put(static_cast<char>((value >> (8 * i)) & 0xff));
  return static_cast<bool>(file);
}

TEST(NewerCPython, IsRefusedWithOneWarningNamingItsVersion) {
  if (auto why = BpfUnavailableReason()) PYPERF_SKIP_OR_FAIL(*why);
  std::string why;
  auto root = EnsurePythonRoot("sid/python3.15", &why);
  if (!root) PYPERF_SKIP_OR_FAIL("no Debian sid root with python3.15: " + why);

  RootTempDir dir(*root);
  const std::string python = dir.Copy(root->dir + root->python, "python3.16");
  ASSERT_TRUE(SetPyVersion(dir.path() + "/python3.16", kPyVersion316));
  ChildProcess workload(ContainerArgv(*root, {python, "-c",
                                              "import sys\n"
                                              "sys.stdout.write('ready\\n'); sys.stdout.flush()\n"
                                              "while True: sum(range(1000))\n"}));
  ASSERT_TRUE(WaitFor([&] { return workload.Stdout() == "ready\n" || !workload.Running(); },
                      kWorkloadReadyTimeout))
      << "the patched interpreter did not start: " << workload.Stderr();
  ASSERT_TRUE(workload.Running()) << workload.Stderr();
  auto children = ChildPids(workload.pid());
  ASSERT_EQ(children.size(), 1u) << "unshare's one child is the interpreter";
  const pid_t pid = children[0];

  auto pyperf = StartPyPerf({"-p", std::to_string(pid), "-F", "99", "-d", "2"});
  PyPerfRun run = FinishPyPerf(*pyperf, "PyPerf -p <patched 3.16>", kPyPerfTimeout);

  const std::string expected = "PyPerf: warning: not profiling pid " + std::to_string(pid) +
                               ": CPython 3.16.0 is not supported";
  std::vector<std::string> naming_it;
  for (const std::string& line : SplitLines(run.stderr_text)) {
    if (line.find("pid " + std::to_string(pid)) != std::string::npos) naming_it.push_back(line);
  }
  ASSERT_EQ(naming_it.size(), 1u) << "stderr:\n" << run.stderr_text;
  EXPECT_EQ(naming_it[0], expected);
  EXPECT_TRUE(run.profile.OfPid(pid).empty())
      << "a 3.16 was profiled:" << Excerpt(run.profile.OfPid(pid));
}

}  // namespace
}  // namespace pyperf_test
