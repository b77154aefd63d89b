// Sample: see Sample.h.
#include "Sample.h"

#include <atomic>

namespace ebpf::pyperf {

size_t SampleHash::operator()(const Sample& sample) const {
  uint64_t h = MixHash((uint64_t{sample.pid} << 32) ^ sample.tid ^ (uint64_t{sample.comm} << 20));
  for (const SampleFrame& f : sample.frames) {
    uint64_t v = (uint64_t{f.name} << 32) ^ (uint64_t{f.file} << 8) ^ static_cast<uint64_t>(f.kind);
    v ^= (uint64_t{static_cast<uint32_t>(f.line)} << 40) ^ (uint64_t{f.object} << 12) ^ (f.address * 0x9e3779b97f4a7c15ULL);
    h = MixHash(h ^ v) + 0x9e3779b97f4a7c15ULL;
  }
  return static_cast<size_t>(h);
}

FrameDictionary::FrameDictionary() { Clear(); }

StringId FrameDictionary::Intern(std::string_view text) {
  auto it = ids_.find(text);
  if (it != ids_.end()) return it->second;
  const auto id = static_cast<StringId>(strings_.size());
  strings_.emplace_back(text);
  ids_.emplace(strings_.back(), id);
  return id;
}

ObjectId FrameDictionary::FindObject(const FileId& file) const {
  auto it = object_ids_.find(file);
  return it == object_ids_.end() ? 0 : it->second;
}

ObjectId FrameDictionary::AddObject(const FileId& file, std::string_view path,
                                    std::string_view build_id) {
  if (ObjectId known = FindObject(file)) return known;
  const auto id = static_cast<ObjectId>(objects_.size());
  objects_.push_back(Object{file, Intern(path), Intern(build_id)});
  object_ids_.emplace(file, id);
  return id;
}

void FrameDictionary::Clear() {
  ids_.clear();
  strings_.clear();
  objects_.clear();
  object_ids_.clear();
  strings_.emplace_back();
  ids_.emplace(strings_.back(), 0);
  objects_.push_back(Object{});  // 0: unknown
  // Unique across dictionaries, so an id kept for one is never taken for
  // another's.
  static std::atomic<uint64_t> generations{0};
  generation_ = ++generations;
}

}  // namespace ebpf::pyperf
