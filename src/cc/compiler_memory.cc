#include "compiler_memory.h"

#include <malloc.h>
#include <sys/mman.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "read_file.h"

namespace ebpf {
namespace {

// One mapping of /proc/self/smaps, as far as the release needs it.
struct Mapping {
  uintptr_t start = 0, end = 0;
  bool writable = false;
  std::string path;
  size_t rss_kib = 0;
  size_t private_kib = 0;  // Anonymous: pages copied on write (relocated, written)
  bool complete = false;   // both fields were read
};

bool IsCompilerLibrary(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  return base.rfind("libLLVM", 0) == 0 || base.rfind("libclang", 0) == 0;
}

std::vector<Mapping> ReadMappings(const std::string& smaps) {
  std::vector<Mapping> mappings;
  std::istringstream lines(smaps);
  std::string line;
  bool has_rss = false, has_anonymous = false;
  while (std::getline(lines, line)) {
    uintptr_t start = 0, end = 0;
    char perms[8] = {0};
    int path_at = 0;
    if (sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR " %7s %*s %*s %*s %n", &start, &end, perms,
               &path_at) == 3 &&
        path_at > 0) {
      if (!mappings.empty()) mappings.back().complete = has_rss && has_anonymous;
      Mapping m;
      m.start = start;
      m.end = end;
      m.writable = perms[1] == 'w';
      m.path = line.substr(static_cast<size_t>(path_at));
      mappings.push_back(m);
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
      if (!m.complete || m.writable || m.private_kib != 0 || m.rss_kib == 0 ||
          !IsCompilerLibrary(m.path))
        continue;
      if (madvise(reinterpret_cast<void*>(m.start), m.end - m.start, MADV_DONTNEED) != 0) continue;
      released.compiler_text_bytes += m.rss_kib * 1024;
      ++released.mappings;
    }
  }
  malloc_trim(0);
  return released;
}

}  // namespace ebpf
