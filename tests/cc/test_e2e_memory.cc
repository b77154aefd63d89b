// PyPerf's resident memory once it samples (issue 35). libbcc compiles the
// BPF program with clang and LLVM in PyPerf's process; their code, about
// 70 MiB of libLLVM and libclang-cpp text, is paged in by that one compile.
// PyPerf gives those pages back before "Ready to profile"
// (src/cc/compiler_memory.h), so what a host sees resident is what PyPerf
// uses. Checked on a real run with native stacks on (the default), through
// a few dumps: RSS at most 40 MiB after Ready and after each dump, and the
// compiler's text mappings (not writable, no private page) all but absent
// from RSS. Memory, not timing: a busy host does not change these figures.
#include <gtest/gtest.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "support/e2e.h"
#include "support/test_support.h"

namespace pyperf_test {
namespace {

constexpr uint64_t kMaxRssKiB = 40 * 1024;

// Resident KiB of `pid`'s mappings of the compiler's libraries that are not
// writable (their text and read-only data), from /proc/PID/smaps.
uint64_t CompilerTextRssKiB(pid_t pid) {
  uint64_t total = 0;
  bool compiler_text = false;
  for (const std::string& line : SplitLines(ReadFile("/proc/" + std::to_string(pid) + "/smaps"))) {
    char perms[8] = {0};
    unsigned long long start = 0, end = 0;
    if (sscanf(line.c_str(), "%llx-%llx %7s", &start, &end, perms) == 3) {
      const size_t slash = line.rfind('/');
      const std::string base = slash == std::string::npos ? "" : line.substr(slash + 1);
      compiler_text = perms[1] != 'w' && (base.rfind("libLLVM", 0) == 0 ||
                                          base.rfind("libclang", 0) == 0);
      continue;
    }
    unsigned long long kib = 0, anonymous = 0;
    if (compiler_text && sscanf(line.c_str(), "Rss: %llu kB", &kib) == 1) total += kib;
    // Pages copied on write (RELRO) stay: they hold relocations.
    if (compiler_text && sscanf(line.c_str(), "Anonymous: %llu kB", &anonymous) == 1)
      total -= std::min<uint64_t>(total, anonymous);
  }
  return total;
}

TEST(Memory, ResidentMemoryAfterReadyIsAtMost40MiBAndStaysThere) {
  auto python = FindInterpreter("3.12");
  PYPERF_REQUIRE_PYTHON_AND_BPF(python, "pyenv's Python 3.12 is not installed");
  auto workload = StartWorkload(*python, "native_busy_loop.py");
  ASSERT_NE(workload, nullptr);
  TempDir dir;
  auto pyperf = StartPyPerf({"-F", "499", "-o", dir.File("out"), "-p",
                             std::to_string(workload->pid())});
  ASSERT_TRUE(WaitForStderr(*pyperf, "Ready to profile", kPyPerfTimeout)) << pyperf->Stderr();
  const uint64_t ready_kib = VmRssKiB(pyperf->pid());
  const uint64_t compiler_kib = CompilerTextRssKiB(pyperf->pid());
  std::cout << "[ memory ] after Ready: RSS " << ready_kib << " KiB, of it compiler text "
            << compiler_kib << " KiB" << std::endl;
  EXPECT_LE(ready_kib, kMaxRssKiB);
  EXPECT_LE(compiler_kib, 1024u) << "the compiler's code pages are still resident";
  for (int dump = 1; dump <= 3; ++dump) {
    ASSERT_TRUE(WaitForCpu(workload->pid(), milliseconds(500)));
    ASSERT_TRUE(RequestDump(*pyperf, seconds(60)).has_value()) << pyperf->Stderr();
    const uint64_t kib = VmRssKiB(pyperf->pid());
    std::cout << "[ memory ] after dump " << dump << ": RSS " << kib << " KiB" << std::endl;
    EXPECT_LE(kib, kMaxRssKiB);
  }
  EXPECT_GT(DumpedFiles(dir.File("out")).size(), 0u);
}

}  // namespace
}  // namespace pyperf_test
