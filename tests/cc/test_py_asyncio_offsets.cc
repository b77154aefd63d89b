// PyAsyncioOffsets (examples/cpp/pyperf/PyAsyncioOffsets.h) on the files of
// real interpreters: Debian sid's python3.14, whose _asyncio is a module in
// lib-dynload, and python3.15, which has it built in (scripts/python-roots.sh's
// root). Checked: each one's .AsyncioDebug section is found where that build
// keeps it, from the interpreter's path alone; its values lie inside their
// structs; the running task sits inside the thread state both versions
// publish in _Py_DebugOffsets (thread_state.size); a version before 3.14, a
// section cut short and offsets outside their struct are refused.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "PyAsyncioOffsets.h"
#include "support/python_roots.h"
#include "support/test_support.h"

namespace pyperf_test {
namespace {

using ebpf::pyperf::AsyncioDebugOffsets;
using ebpf::pyperf::FindAsyncioDebugOffsets;
using ebpf::pyperf::kAsyncioDebugSize;
using ebpf::pyperf::ParseAsyncioDebugOffsets;
using ebpf::pyperf::PythonProcessInfo;

PythonProcessInfo InfoFor(const PythonRoot& root, int minor) {
  PythonProcessInfo info;
  info.version = {3, minor, 0};
  info.module.path = root.python;
  info.module.host_path = root.dir + root.python;
  info.module.is_main_executable = true;
  return info;
}

TEST(PyAsyncioOffsets, FoundInTheModuleOrTheInterpreterWhereEachBuildKeepsIt) {
  for (const auto& [spec, minor] :
       {std::pair<std::string, int>{"sid", 14}, {"sid/python3.15", 15}}) {
    SCOPED_TRACE(spec);
    std::string why;
    auto root = EnsurePythonRoot(spec, &why);
    if (!root) PYPERF_SKIP_OR_FAIL("no Debian " + spec + " root: " + why);
    const PythonProcessInfo info = InfoFor(*root, minor);
    const auto candidates = ebpf::pyperf::AsyncioDebugCandidates(info);
    ASSERT_FALSE(candidates.empty());
    EXPECT_EQ(candidates[0], info.module.host_path);
    if (minor == 14) {
      // 3.14's _asyncio is a module: found beside the interpreter's lib.
      ASSERT_GE(candidates.size(), 2u);
      EXPECT_NE(candidates[1].find("/usr/lib/python3.14/lib-dynload/_asyncio.cpython-314"),
                std::string::npos)
          << candidates[1];
    }
    auto found = FindAsyncioDebugOffsets(info);
    ASSERT_TRUE(found.ok()) << found.error();
    const AsyncioDebugOffsets& a = *found;
    EXPECT_GT(a.task_size, 0u);
    EXPECT_LT(a.task_coro + 8, a.task_size + 1);
    EXPECT_LT(a.task_name + 8, a.task_size + 1);
    EXPECT_GT(a.tstate_running_task, a.tstate_running_loop);
    EXPECT_LT(a.tstate_running_task + 8, a.tstate_size + 1);
  }
}

TEST(PyAsyncioOffsets, OlderVersionsShortSectionsAndImplausibleOffsetsAreRefused) {
  PythonProcessInfo old;
  old.version = {3, 13, 0};
  old.module.host_path = "/nonexistent/python3.13";
  EXPECT_FALSE(FindAsyncioDebugOffsets(old).ok());
  uint64_t v[13] = {168, 136, 96, 108, 109, 128, 152, 1000, 8, 936, 864, 872, 880};
  std::string bytes(reinterpret_cast<const char*>(v), sizeof(v));
  ASSERT_EQ(bytes.size(), kAsyncioDebugSize);
  EXPECT_TRUE(ParseAsyncioDebugOffsets(bytes).ok());
  EXPECT_FALSE(ParseAsyncioDebugOffsets(bytes.substr(0, 96)).ok());
  v[5] = 4096;  // task_coro beyond sizeof(TaskObj)
  EXPECT_FALSE(
      ParseAsyncioDebugOffsets(std::string(reinterpret_cast<const char*>(v), sizeof(v))).ok());
  v[5] = 128;
  v[11] = 2000;  // the running task beyond the thread state
  EXPECT_FALSE(
      ParseAsyncioDebugOffsets(std::string(reinterpret_cast<const char*>(v), sizeof(v))).ok());
}

}  // namespace
}  // namespace pyperf_test
