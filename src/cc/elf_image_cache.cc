// ElfImageCache; see elf_image_cache.h.
#include "elf_image_cache.h"

#include <libelf.h>

#include <utility>

namespace ebpf {
namespace {

// libelf's bookkeeping for one section (its Elf_Scn and data descriptors),
// roughly, as elfutils allocates it when the image is opened.
constexpr size_t kLibelfBytesPerSection = 256;

}  // namespace

size_t ElfImageCache::ImageBytes::operator()(const std::shared_ptr<const ElfImage>& image) const {
  size_t sections = 0;
  if (image->elf() != nullptr && elf_getshdrnum(image->elf(), &sections) != 0) sections = 0;
  return sizeof(ElfImage) + image->load_segments().capacity() * sizeof(ElfLoadSegment) +
         sections * kLibelfBytesPerSection;
}

ElfImageCache::ElfImageCache(const CacheLimits& limits) : images_(limits) {}

ElfImageCache& ElfImageCache::Shared() {
  static ElfImageCache cache;
  return cache;
}

Result<std::shared_ptr<const ElfImage>> ElfImageCache::Get(const OpenedFile& file) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (const auto* cached = images_.Lookup(file.stamp)) return *cached;
  }
  auto image = ElfImage::MapFd(file.fd.get());
  if (!image.ok()) return Status::Error(file.path + ": " + image.error());
  auto shared = std::make_shared<const ElfImage>(std::move(image).value());
  std::lock_guard<std::mutex> lock(mu_);
  ++parses_;
  // Keyed by what was mapped: a file rewritten since it was opened is known
  // by its new stamp, and the old stamp is not answered with new bytes.
  images_.Insert(shared->file(), shared);
  return shared;
}

Result<std::shared_ptr<const ElfImage>> ElfImageCache::GetPath(const std::string& path) {
  auto file = OpenRegularFile(path);
  if (!file.ok()) return file.status();
  return Get(*file);
}

void ElfImageCache::EndRound() {
  std::lock_guard<std::mutex> lock(mu_);
  images_.EndRound();
}

void ElfImageCache::set_limits(const CacheLimits& limits) {
  std::lock_guard<std::mutex> lock(mu_);
  images_.set_limits(limits);
}

ElfImageCacheStats ElfImageCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ElfImageCacheStats{images_.stats(), parses_};
}

}  // namespace ebpf
