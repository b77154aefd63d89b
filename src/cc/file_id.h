// FileId: a mapped file's identity (device and inode as /proc/PID/maps shows
// them), the key of every cache that is shared by the processes mapping the
// same file.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ebpf {

struct FileId {
  uint64_t dev = 0;
  uint64_t ino = 0;
  bool operator==(const FileId& o) const { return dev == o.dev && ino == o.ino; }
  bool operator!=(const FileId& o) const { return !(*this == o); }
};
// The vDSO has no inode: it is keyed as this.
inline constexpr FileId kVdsoFileId{0, 1};

inline uint64_t MixHash(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}
struct FileIdHash {
  size_t operator()(const FileId& f) const {
    return MixHash(f.dev * 0x9e3779b97f4a7c15ULL ^ f.ino);
  }
};

}  // namespace ebpf
