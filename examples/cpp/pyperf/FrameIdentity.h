// FrameIdentity: which frames the formats people read (flame graph,
// speedscope) show as one. A Python frame is its qualified name, file and
// line; any other frame its kind and text: native frames that differ only in
// their file or address are one function to a reader. FrameTable numbers the
// distinct frames of a dump in order of first sight.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "Sample.h"

namespace ebpf::pyperf {

class FrameTable {
 public:
  // The number of `frame`'s identity: 0, 1, ... in order of first sight.
  uint32_t Number(const SampleFrame& frame) {
    const Key key = KeyOf(frame);
    auto [it, added] = numbers_.try_emplace(key, static_cast<uint32_t>(frames_.size()));
    if (added) frames_.push_back(frame);
    return it->second;
  }
  // The first frame seen of identity `number`.
  const SampleFrame& frame(uint32_t number) const { return frames_[number]; }
  size_t size() const { return frames_.size(); }

 private:
  struct Key {
    FrameKind kind;
    StringId name;
    StringId file;
    int32_t line;
    bool operator==(const Key& o) const {
      return kind == o.kind && name == o.name && file == o.file && line == o.line;
    }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      uint64_t h = (uint64_t{k.name} << 32 | k.file) * 0x9e3779b97f4a7c15ull;
      return static_cast<size_t>(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(k.line)) << 3) ^
                                 static_cast<uint64_t>(k.kind));
    }
  };
  static Key KeyOf(const SampleFrame& frame) {
    if (frame.kind == FrameKind::kPython) return {frame.kind, frame.name, frame.file, frame.line};
    return {frame.kind, frame.name, 0, 0};
  }

  std::vector<SampleFrame> frames_;
  std::unordered_map<Key, uint32_t, KeyHash> numbers_;
};

}  // namespace ebpf::pyperf
