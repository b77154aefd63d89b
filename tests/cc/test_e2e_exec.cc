// A profiled Python process that execs into another interpreter keeps its pid
// and start time; only its address space (the task's mm, which every event
// carries) tells. PyPerf must notice at the first sample of the new image,
// print no Python frame decoded with the old program's offsets, inspect the
// process again, and go on with the right frames.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "support/collapsed.h"
#include "support/e2e.h"
#include "support/test_support.h"

namespace pyperf_test {
namespace {

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(ProcessExec, AnExecIntoAnotherInterpreterIsNoticedAndInspectedAgain) {
  auto first = FindInterpreter("3.11");
  auto second = FindInterpreter("3.8");
  if (!first || !second) PYPERF_SKIP_OR_FAIL("pyenv 3.11 and 3.8 are needed");
  PYPERF_REQUIRE_BPF();
  TempDir dir;
  const std::string trigger = dir.path() + "/exec-now";
  auto workload = StartWorkload(*first, "exec_into.py", {"first", second->path, trigger});
  ASSERT_NE(workload, nullptr);
  const pid_t pid = workload->pid();
  const std::string profiling = "profiling pid " + std::to_string(pid) + " ";
  auto pyperf = StartPyPerf({"-v", "1", "-F", "199", "-p", std::to_string(pid)});
  ASSERT_TRUE(WaitForStderr(*pyperf, profiling, seconds(120))) << pyperf->Stderr();
  EXPECT_TRUE(WaitForCpu(pid, seconds(1)));  // samples of the first image: its mm is known

  { std::ofstream(trigger) << "go\n"; }
  ASSERT_TRUE(WaitFor([&] { return Count(pyperf->Stderr(), profiling) >= 2; }, seconds(60)))
      << "PyPerf did not inspect pid " << pid << " again after its exec; stderr:\n"
      << pyperf->Stderr();
  EXPECT_TRUE(WaitForCpu(pid, seconds(1)));  // samples of the second image
  pyperf->Signal(SIGTERM);
  PyPerfRun run = FinishPyPerf(*pyperf, "PyPerf -p " + std::to_string(pid), seconds(120));

  const std::string stderr_text = run.stderr_text;
  size_t second_look = stderr_text.find(profiling, stderr_text.find(profiling) + 1);
  ASSERT_NE(second_look, std::string::npos);
  EXPECT_NE(stderr_text.find("(CPython 3.8", second_look), std::string::npos)
      << "the second look did not find CPython 3.8:\n"
      << stderr_text;

  // Every Python frame is one of the script's own, or of the interpreters'
  // start-up (code with a pseudo-file name such as "<frozen importlib._bootstrap>"
  // or "<string>", the line of a .pth file site.py runs; a module file that
  // exists): a frame decoded with the other interpreter's offsets would name
  // something else, or fail to parse.
  const std::set<std::string> known = {"before_exec_spin", "after_exec_spin", "<module>"};
  auto from_an_interpreter = [&](const std::string& file) {
    const bool pseudo = file.size() > 2 && file.front() == '<' && file.back() == '>';
    return pseudo ||
           (file.find("exec_into.py") == std::string::npos && std::filesystem::exists(file));
  };
  uint64_t after = 0, before = 0;
  for (const auto& line : run.profile.OfPid(pid)) {
    for (const auto& frame : FramesOfKind(line, FrameKind::kPython)) {
      std::string why;
      auto parsed = ParsePythonFrame(frame, &why);
      ASSERT_TRUE(parsed.has_value()) << why << ": " << line.text;
      if (from_an_interpreter(parsed->file)) continue;
      EXPECT_NE(parsed->file.find("exec_into.py"), std::string::npos) << line.text;
      EXPECT_TRUE(known.count(parsed->function))
          << "a frame the script does not have: " << line.text;
    }
    for (const auto& frame : line.frames) {
      if (IsPythonFunction(frame, "after_exec_spin")) after += line.count;
      if (IsPythonFunction(frame, "before_exec_spin")) before += line.count;
    }
  }
  EXPECT_GT(before, 0u) << "no samples before the exec";
  EXPECT_GT(after, 0u) << "no samples of the exec'd interpreter";
  auto replaced = DumpCounter(stderr_text, "replaced processes");
  ASSERT_TRUE(replaced.has_value()) << stderr_text;
  std::cout << "[ exec ] samples before " << before << ", after " << after << ", replaced "
            << *replaced << std::endl;
}

}  // namespace
}  // namespace pyperf_test
