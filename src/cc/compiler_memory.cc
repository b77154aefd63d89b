#include "compiler_memory.h"

#include <malloc.h>
#include <sys/mman.h>

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "proc_maps.h"
#include "read_file.h"

namespace ebpf {
namespace {

// One mapping of /proc/self/smaps, as far as the release needs it.
struct Mapping {
  MemoryMapping mapping;  // its first line, as in /proc/PID/maps
  size_t rss_kib = 0;
  size_t private_kib = 0;  // Anonymous: pages copied on write (relocated, written)
  bool complete = false;   // both fields were read
};

bool IsCompilerLibrary(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  return base.rfind("libLLVM", 0) == 0 || base.rfind("libclang", 0) == 0;
}

std::vector<Mapping> ReadMappings(std::string_view smaps) {
  std::vector<Mapping> mappings;
  bool has_rss = false, has_anonymous = false;
  while (!smaps.empty()) {
    const size_t eol = smaps.find('\n');
    const std::string line(smaps.substr(0, eol));
    smaps.remove_prefix(eol == std::string_view::npos ? smaps.size() : eol + 1);
    MemoryMapping header;
    if (ParseProcMapsLine(line, &header)) {
      if (!mappings.empty()) mappings.back().complete = has_rss && has_anonymous;
      mappings.push_back(Mapping{std::move(header)});
      has_rss = has_anonymous = false;
      continue;
    }
    if (mappings.empty()) continue;
    size_t kib = 0;
    if (sscanf(line.c_str(), "Rss: %zu kB", &kib) == 1) {
      mappings.back().rss_kib = kib;
      has_rss = true;
    } else if (sscanf(line.c_str(), "Anonymous: %zu kB", &kib) == 1) {
      mappings.back().private_kib = kib;
      has_anonymous = true;
    }
  }
  if (!mappings.empty()) mappings.back().complete = has_rss && has_anonymous;
  return mappings;
}

}  // namespace

ReleasedMemory ReleaseCompilerMemory() {
  ReleasedMemory released;
  std::string smaps;
  if (ReadFileInto("/proc/self/smaps", &smaps) == 0) {
    for (const Mapping& m : ReadMappings(smaps)) {
      const MemoryMapping& at = m.mapping;
      if (!m.complete || at.writable() || m.private_kib != 0 || m.rss_kib == 0 ||
          !IsCompilerLibrary(at.path))
        continue;
      if (madvise(reinterpret_cast<void*>(at.start), at.end - at.start, MADV_DONTNEED) != 0)
        continue;
      released.compiler_text_bytes += m.rss_kib * 1024;
      ++released.mappings;
    }
  }
  malloc_trim(0);
  return released;
}

}  // namespace ebpf
