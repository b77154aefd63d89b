// UniqueMmap: sole owner of a memory mapping, unmapped when the owner goes
// away.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <utility>

namespace ebpf {

class UniqueMmap {
 public:
  UniqueMmap() = default;
  UniqueMmap(void* addr, size_t size) : addr_(addr), size_(size) {}
  UniqueMmap(const UniqueMmap&) = delete;
  UniqueMmap& operator=(const UniqueMmap&) = delete;
  UniqueMmap(UniqueMmap&& other) noexcept
      : addr_(std::exchange(other.addr_, MAP_FAILED)), size_(std::exchange(other.size_, 0)) {}
  UniqueMmap& operator=(UniqueMmap&& other) noexcept {
    if (this != &other) {
      reset();
      addr_ = std::exchange(other.addr_, MAP_FAILED);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  ~UniqueMmap() { reset(); }

  void* get() const { return addr_; }
  size_t size() const { return size_; }
  bool valid() const { return addr_ != MAP_FAILED; }
  void reset() {
    if (addr_ != MAP_FAILED) ::munmap(addr_, size_);
    addr_ = MAP_FAILED;
    size_ = 0;
  }

 private:
  void* addr_ = MAP_FAILED;
  size_t size_ = 0;
};

}  // namespace ebpf
