// Finding debug symbols kept apart from a binary; see debug_file.h.
#include "debug_file.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <string_view>

#include "mapped_file.h"

namespace ebpf {
namespace {

struct Candidate {
  std::string path;
  bool check_crc = false;
  uint32_t crc = 0;
};

std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return "";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string JoinRoot(const std::string& root, const std::string& path) {
  if (root.empty() || root == "/") return path;
  return root + path;
}

// The paths to try, best first: by build-id, then next to the binary by its
// .gnu_debuglink name.
std::vector<Candidate> Candidates(const ElfImage& binary, const std::string& build_id,
                                  const DebugFileSearch& search) {
  std::vector<Candidate> candidates;
  const bool other_root = !search.root.empty() && search.root != "/";
  const bool host_too = other_root && search.search_host_debug_dirs;
  if (build_id.size() > 2) {
    std::string rel =
        "/usr/lib/debug/.build-id/" + build_id.substr(0, 2) + "/" + build_id.substr(2) + ".debug";
    candidates.push_back({JoinRoot(search.root, rel)});
    if (host_too) candidates.push_back({rel});
  }
  // .gnu_debuglink: the file name, NUL, padding to 4 bytes, the CRC-32.
  std::string_view link = binary.SectionBytes(binary.FindSection(".gnu_debuglink"));
  if (link.size() <= 4) return candidates;
  size_t name_len = strnlen(link.data(), link.size());
  size_t crc_pos = (name_len + 1 + 3) & ~size_t{3};
  std::string dir = DirName(search.path_in_root);
  if (name_len == 0 || crc_pos + 4 > link.size() || dir.empty()) return candidates;
  uint32_t crc;
  std::memcpy(&crc, link.data() + crc_pos, 4);
  std::string file(link.data(), name_len);
  std::string sep = dir == "/" ? "" : "/";
  candidates.push_back({JoinRoot(search.root, dir + sep + file), true, crc});
  candidates.push_back({JoinRoot(search.root, dir + sep + ".debug/" + file), true, crc});
  candidates.push_back({JoinRoot(search.root, "/usr/lib/debug" + dir + sep + file), true, crc});
  if (host_too) candidates.push_back({"/usr/lib/debug" + dir + sep + file, true, crc});
  return candidates;
}

// liblzma, loaded on first use: Debian's libunwind already depends on
// liblzma.so.5, so it is always installed where PyPerf runs, and loading it
// lazily keeps it out of the link line.
using LzmaStreamBufferDecodeFn = int (*)(uint64_t* memlimit, uint32_t flags, const void* allocator,
                                         const uint8_t* in, size_t* in_pos, size_t in_size,
                                         uint8_t* out, size_t* out_pos, size_t out_size);
LzmaStreamBufferDecodeFn LzmaDecoder() {
  static LzmaStreamBufferDecodeFn fn = [] {
    void* handle = dlopen("liblzma.so.5", RTLD_NOW | RTLD_LOCAL);
    if (!handle) return LzmaStreamBufferDecodeFn{nullptr};
    return reinterpret_cast<LzmaStreamBufferDecodeFn>(dlsym(handle, "lzma_stream_buffer_decode"));
  }();
  return fn;
}

// Decompresses an .xz stream. Returns false if liblzma is missing or the data
// is not valid.
bool DecompressXz(const uint8_t* in, size_t in_size, std::vector<uint8_t>* out) {
  LzmaStreamBufferDecodeFn decode = LzmaDecoder();
  if (!decode) return false;
  constexpr int kLzmaOk = 0, kLzmaBufError = 10;
  size_t capacity = std::max<size_t>(in_size * 8, 64 * 1024);
  constexpr size_t kMaxSize = size_t{512} << 20;
  while (capacity <= kMaxSize) {
    out->resize(capacity);
    uint64_t memlimit = UINT64_MAX;
    size_t in_pos = 0, out_pos = 0;
    int ret =
        decode(&memlimit, 0, nullptr, in, &in_pos, in_size, out->data(), &out_pos, out->size());
    if (ret == kLzmaOk) {
      out->resize(out_pos);
      return true;
    }
    if (ret != kLzmaBufError) return false;
    capacity *= 2;
  }
  return false;
}

}  // namespace

void ForEachDebugFile(const ElfImage& binary, const std::string& build_id,
                      const DebugFileSearch& search,
                      const std::function<bool(const std::string&, const ElfImage&)>& visit) {
  for (const Candidate& candidate : Candidates(binary, build_id, search)) {
    // A candidate path may name a FIFO: OpenRegularFile refuses it at once.
    auto file = OpenRegularFile(candidate.path);
    if (!file.ok()) continue;
    auto debug = ElfImage::MapFd(file->fd.get());
    if (!debug.ok() || !debug->is_64bit()) continue;
    if (debug->file().SameFile(binary.file())) continue;  // the binary itself
    if (!build_id.empty()) {
      if (debug->BuildId() != build_id) continue;
    } else if (candidate.check_crc) {
      std::string_view bytes = debug->bytes();
      if (DebuglinkCrc32(0, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()) !=
          candidate.crc) {
        continue;
      }
    }
    if (visit(candidate.path, *debug)) return;
  }
}

Result<ElfImage> MiniDebugInfo(const ElfImage& binary, std::vector<uint8_t>* storage) {
  std::string_view xz = binary.SectionBytes(binary.FindSection(".gnu_debugdata"));
  if (xz.empty()) return Status::Error("no .gnu_debugdata");
  if (!DecompressXz(reinterpret_cast<const uint8_t*>(xz.data()), xz.size(), storage)) {
    return Status::Error("cannot decompress .gnu_debugdata (is liblzma.so.5 installed?)");
  }
  auto image = ElfImage::FromMemory(storage->data(), storage->size());
  if (image.ok() && !image->is_64bit()) return Status::Error(".gnu_debugdata is not 64-bit");
  return image;
}

uint32_t DebuglinkCrc32(uint32_t crc, const uint8_t* data, size_t len) {
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  crc = ~crc;
  for (size_t i = 0; i < len; ++i) crc = table[(crc ^ data[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

}  // namespace ebpf
