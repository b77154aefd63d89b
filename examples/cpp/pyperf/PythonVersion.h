// PythonVersion: a CPython release as major.minor.micro.
#pragma once

#include <string>
#include <tuple>

namespace pyperf {

struct PythonVersion {
  int major = 0;
  int minor = 0;
  int micro = 0;

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
};

}  // namespace pyperf
