// Sample: one BPF event as data, the unit every output format reads.
//
// A sample is its process, thread and command name, and its frames root
// first. A frame is its kind and interned strings (FrameDictionary): a Python
// frame its qualified name ("Class.function"), source file and line; a
// native frame its symbol, the mapped file it is in and its address in that
// file's own terms (what addr2line takes); a kernel frame its symbol; an
// asyncio task (--async-tasks) its name and its coroutine's qualified name; a
// marker (kind kMarker) the text that stands where frames could not be had
// (FrameSpelling.h lists them). Nothing here is spelled: the collapsed text,
// the names people read in a flame graph and pprof's functions are made from
// these by FrameSpelling.h, each once per dump.
//
// SampleAssembler.h builds samples from events; ProfileOutput.h counts equal
// samples; ProfileEncoder.h hands them to every format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "file_id.h"

namespace ebpf::pyperf {

enum class FrameKind : uint8_t { kPython, kNative, kKernel, kMarker, kTask };

// An id of FrameDictionary's strings; 0 is the empty string.
using StringId = uint32_t;
// An id of FrameDictionary's mapped files; 0 is "unknown" (no file).
using ObjectId = uint32_t;

struct SampleFrame {
  FrameKind kind = FrameKind::kMarker;
  StringId name = 0;  // Python: qualified name; native, kernel: symbol; task: its name;
                      // marker: its text
  StringId file = 0;  // Python: the source file; task: its coroutine's qualified name
  int32_t line = 0;   // Python: the line shown
  ObjectId object = 0;   // native: the mapped file (0 = unknown)
  uint64_t address = 0;  // native: the address in that file's own terms (0 = unknown)

  bool operator==(const SampleFrame& o) const {
    return kind == o.kind && name == o.name && file == o.file && line == o.line &&
           object == o.object && address == o.address;
  }
};

struct Sample {
  uint32_t pid = 0;
  uint32_t tid = 0;
  StringId comm = 0;  // the thread's name, valid UTF-8
  std::vector<SampleFrame> frames;  // root first

  bool operator==(const Sample& o) const {
    return pid == o.pid && tid == o.tid && comm == o.comm && frames == o.frames;
  }
};

struct SampleHash {
  size_t operator()(const Sample& sample) const;
};

// The strings and mapped files the samples of one dump interval name.
// Interning allocates only for what is new; ids stay valid until Clear.
class FrameDictionary {
 public:
  // A mapped file a native frame is in: what pprof's mappings show.
  struct Object {
    FileId file;
    StringId path = 0;      // as the process maps it ("" if unknown)
    StringId build_id = 0;  // lowercase hex, "" if the file has none
  };

  FrameDictionary();

  StringId Intern(std::string_view text);
  std::string_view String(StringId id) const { return strings_[id]; }
  size_t strings() const { return strings_.size(); }

  // The id of `file` if it was added since the last Clear, else 0.
  ObjectId FindObject(const FileId& file) const;
  ObjectId AddObject(const FileId& file, std::string_view path, std::string_view build_id);
  const Object& object(ObjectId id) const { return objects_[id]; }
  size_t objects() const { return objects_.size(); }

  // Forgets everything (after a dump delivered the samples naming these ids).
  // generation() changes (to a value no dictionary had), so a caller that
  // keeps ids knows they are stale.
  void Clear();
  uint64_t generation() const { return generation_; }

 private:
  std::deque<std::string> strings_;  // a deque: string_views into it stay valid
  std::unordered_map<std::string_view, StringId> ids_;
  std::vector<Object> objects_;
  std::unordered_map<FileId, ObjectId, FileIdHash> object_ids_;
  uint64_t generation_ = 0;
};

}  // namespace ebpf::pyperf
