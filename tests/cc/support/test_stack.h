// Samples a test writes by hand (Sample.h), for ProfileOutput and the
// encoders: a TestStack names its frames by their strings, and Intern puts
// them in a FrameDictionary as the sample assembler does.
//   TestStack("python", 7, 8).Python("Handler.run", "/app/srv.py", 12).Native("memcpy")
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "FrameSpelling.h"
#include "Sample.h"

namespace pyperf_test {

struct TestFrame {
  ebpf::pyperf::FrameKind kind = ebpf::pyperf::FrameKind::kMarker;
  std::string name;  // Python: the qualified name ("Class.function")
  std::string file;  // Python: the source file; task: its coroutine
  int line = 0;
  // Native: the mapped file ("" = unknown), its build-id, the address in it.
  std::string object_path;
  std::string build_id;
  uint64_t address = 0;
};

struct TestStack {
  std::string comm;
  uint32_t pid = 0;
  uint32_t tid = 0;
  std::vector<TestFrame> frames;  // root first

  TestStack(std::string comm, uint32_t pid, uint32_t tid);
  TestStack& Python(std::string qualified_name, std::string file, int line);
  // A native frame in `object_path` (empty: in no known file) at `address`.
  TestStack& Native(std::string name, std::string object_path = "", std::string build_id = "",
                    uint64_t address = 0);
  TestStack& Kernel(std::string name);
  TestStack& Marker(std::string text);
  // An asyncio task frame: the task's name and its coroutine's qualified name.
  TestStack& Task(std::string name, std::string coroutine);
};

// The sample `stack` stands for, its strings interned in `dictionary`. A
// native frame's file gets a FileId of its own per path.
ebpf::pyperf::Sample Intern(const TestStack& stack, ebpf::pyperf::FrameDictionary* dictionary);

// The collapsed line (without count) `stack` is spelled as.
std::string Collapsed(const TestStack& stack);

}  // namespace pyperf_test
