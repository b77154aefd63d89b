// PythonVersion: a CPython release as major.minor.micro.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>

namespace ebpf::pyperf {

// Ordered by (major, minor, micro); 3.11.7 is {3, 11, 7}.
struct PythonVersion {
  // The release a PY_VERSION_HEX names: 0xMMmmuuLS is major, minor, micro,
  // then the release level and serial, which are dropped (0x030b07f0 is
  // 3.11.7, 0x030e00a1 is 3.14.0).
  static PythonVersion FromHex(uint64_t hex) {
    return PythonVersion{static_cast<int>((hex >> 24) & 0xff), static_cast<int>((hex >> 16) & 0xff),
                         static_cast<int>((hex >> 8) & 0xff)};
  }

  std::string ToString() const {
    return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(micro);
  }
  bool operator==(const PythonVersion& o) const {
    return std::tie(major, minor, micro) == std::tie(o.major, o.minor, o.micro);
  }
  bool operator<(const PythonVersion& o) const {
    return std::tie(major, minor, micro) < std::tie(o.major, o.minor, o.micro);
  }
  bool AtLeast(int maj, int min) const { return major > maj || (major == maj && minor >= min); }

  int major = 0;
  int minor = 0;
  int micro = 0;
};

}  // namespace ebpf::pyperf
