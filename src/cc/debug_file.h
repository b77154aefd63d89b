// Debug symbols kept apart from a binary, as distros ship them: a separate
// debug file found through the build-id or .gnu_debuglink (looked up under the
// process's root first, so a container's /usr/lib/debug is used), and the
// xz-compressed "MiniDebugInfo" ELF in .gnu_debugdata (decompressed with
// liblzma when it is present). NativeModule merges what these hold with the
// binary's own tables.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "elf_image.h"
#include "status.h"

namespace ebpf {

// Where to look for a binary's debug file.
struct DebugFileSearch {
  // Prefix under which the process's files are reached ("/proc/PID/root", a
  // recorded snapshot's root; "" = the host's "/").
  std::string root;
  // The binary's path as the process sees it, for .gnu_debuglink (may be "").
  std::string path_in_root;
  // Also look on the host's /usr/lib/debug when root is not the host's.
  bool search_host_debug_dirs = true;
};

// Calls `visit` with each debug file that belongs to this very build of
// `binary` (same build-id when it has one, else the CRC its .gnu_debuglink
// records), by path and mapped image, in the order a debugger tries them,
// until `visit` returns true. The binary itself is never offered.
void ForEachDebugFile(const ElfImage& binary, const std::string& build_id,
                      const DebugFileSearch& search,
                      const std::function<bool(const std::string&, const ElfImage&)>& visit);

// The ELF image inside `binary`'s .gnu_debugdata, decompressed into *storage
// (which must outlive the image); an error if there is none or it cannot be
// decompressed (liblzma missing, bad data).
Result<ElfImage> MiniDebugInfo(const ElfImage& binary, std::vector<uint8_t>* storage);

// CRC-32 as used by .gnu_debuglink (the zlib polynomial).
uint32_t DebuglinkCrc32(uint32_t crc, const uint8_t* data, size_t len);

}  // namespace ebpf
