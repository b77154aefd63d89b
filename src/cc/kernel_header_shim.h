// KernelHeaderShim: lets libbcc compile BPF programs on hosts without kernel
// headers. libbcc insists on a kernel source tree (it chdirs into it and
// force-includes include/linux/kconfig.h); PyPerf's BPF code reads kernel
// structures only through offsets computed from BTF, so a handful of small
// headers of our own (kernel_headers/, embedded in the binary) satisfy it.
// The shim writes them into a private temporary directory, points
// BCC_KERNEL_SOURCE at it, and removes the directory when destroyed.
#pragma once

#include <memory>
#include <string>

#include "status.h"

namespace ebpf {

class KernelHeaderShim {
 public:
  // Writes the headers under a new directory in $TMPDIR (or /tmp) and sets
  // BCC_KERNEL_SOURCE for this process. The returned owner removes both.
  static Result<std::unique_ptr<KernelHeaderShim>> Install();
  ~KernelHeaderShim();
  KernelHeaderShim(const KernelHeaderShim&) = delete;
  KernelHeaderShim& operator=(const KernelHeaderShim&) = delete;

  const std::string& directory() const { return dir_; }

 private:
  explicit KernelHeaderShim(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
  std::string previous_env_;
  bool had_previous_env_ = false;
};

// LINUX_VERSION_CODE for a `uname -r` release string such as "6.1.0-18-amd64"
// (each part capped at 255, as the kernel's KERNEL_VERSION does).
unsigned LinuxVersionCode(const std::string& release);

}  // namespace ebpf
