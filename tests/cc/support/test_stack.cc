#include "support/test_stack.h"

#include <functional>
#include <utility>

namespace pyperf_test {

TestStack::TestStack(std::string comm_in, uint32_t pid_in, uint32_t tid_in)
    : comm(std::move(comm_in)), pid(pid_in), tid(tid_in) {}

TestStack& TestStack::Python(std::string qualified_name, std::string file, int line) {
  TestFrame f;
  f.kind = ebpf::pyperf::FrameKind::kPython;
  f.name = std::move(qualified_name);
  f.file = std::move(file);
  f.line = line;
  frames.push_back(std::move(f));
  return *this;
}

TestStack& TestStack::Native(std::string name, std::string object_path, std::string build_id,
                             uint64_t address) {
  TestFrame f;
  f.kind = ebpf::pyperf::FrameKind::kNative;
  f.name = std::move(name);
  f.object_path = std::move(object_path);
  f.build_id = std::move(build_id);
  f.address = address;
  frames.push_back(std::move(f));
  return *this;
}

TestStack& TestStack::Kernel(std::string name) {
  TestFrame f;
  f.kind = ebpf::pyperf::FrameKind::kKernel;
  f.name = std::move(name);
  frames.push_back(std::move(f));
  return *this;
}

TestStack& TestStack::Marker(std::string text) {
  TestFrame f;
  f.kind = ebpf::pyperf::FrameKind::kMarker;
  f.name = std::move(text);
  frames.push_back(std::move(f));
  return *this;
}

TestStack& TestStack::Task(std::string name, std::string coroutine) {
  TestFrame f;
  f.kind = ebpf::pyperf::FrameKind::kTask;
  f.name = std::move(name);
  f.file = std::move(coroutine);
  frames.push_back(std::move(f));
  return *this;
}

ebpf::pyperf::Sample Intern(const TestStack& stack, ebpf::pyperf::FrameDictionary* dictionary) {
  ebpf::pyperf::Sample sample;
  sample.pid = stack.pid;
  sample.tid = stack.tid;
  sample.comm = dictionary->Intern(stack.comm);
  for (const TestFrame& f : stack.frames) {
    ebpf::pyperf::SampleFrame frame;
    frame.kind = f.kind;
    frame.name = dictionary->Intern(f.name);
    if (f.kind == ebpf::pyperf::FrameKind::kPython) {
      frame.file = dictionary->Intern(f.file);
      frame.line = f.line;
    }
    if (f.kind == ebpf::pyperf::FrameKind::kTask) frame.file = dictionary->Intern(f.file);
    if (f.kind == ebpf::pyperf::FrameKind::kNative && !f.object_path.empty()) {
      // A made-up identity per path (inode 0 is never one).
      const ebpf::FileId id{0xfe01, std::hash<std::string>()(f.object_path) | 1};
      frame.object = dictionary->AddObject(id, f.object_path, f.build_id);
      frame.address = f.address;
    }
    sample.frames.push_back(frame);
  }
  return sample;
}

std::string Collapsed(const TestStack& stack) {
  ebpf::pyperf::FrameDictionary dictionary;
  ebpf::pyperf::Sample sample = Intern(stack, &dictionary);
  ebpf::pyperf::StackSpeller speller(dictionary);
  std::string out;
  speller.AppendCollapsedStack(sample, &out);
  return out;
}

}  // namespace pyperf_test
