// KernelHeaderShim: see kernel_header_shim.h.
#include "kernel_header_shim.h"

#include <ftw.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

namespace ebpf {
// Generated at build time from src/cc/kernel_headers (cmake/EmbedFiles.cmake).
const std::vector<std::pair<std::string, std::string>>& EmbeddedKernelHeaders();

namespace {

constexpr char kEnvName[] = "BCC_KERNEL_SOURCE";

Status MakeDirs(const std::string& root, const std::string& relative_file) {
  std::string path = root;
  size_t start = 0;
  while (true) {
    size_t slash = relative_file.find('/', start);
    if (slash == std::string::npos) return Status::Ok();
    path = root + "/" + relative_file.substr(0, slash);
    if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST)
      return Status::Error("cannot create " + path + ": " + strerror(errno));
    start = slash + 1;
  }
}

Status WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  out.close();
  if (!out) return Status::Error("cannot write " + path);
  return Status::Ok();
}

int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) {
  ::remove(path);
  return 0;
}

}  // namespace

unsigned LinuxVersionCode(const std::string& release) {
  unsigned parts[3] = {0, 0, 0};
  size_t pos = 0;
  for (int i = 0; i < 3 && pos < release.size(); ++i) {
    unsigned value = 0;
    bool any = false;
    while (pos < release.size() && release[pos] >= '0' && release[pos] <= '9') {
      value = value * 10 + (release[pos] - '0');
      if (value > 100000) value = 100000;
      ++pos;
      any = true;
    }
    if (!any) break;
    parts[i] = value > 255 ? 255 : value;
    if (pos < release.size() && release[pos] == '.') ++pos;
    else break;
  }
  return (parts[0] << 16) + (parts[1] << 8) + parts[2];
}

Result<std::unique_ptr<KernelHeaderShim>> KernelHeaderShim::Install() {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/pyperf-kheaders-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr)
    return Status::Error("cannot create a directory for the kernel-header shim (" + templ +
                         "): " + strerror(errno) + "; set TMPDIR to a writable directory");
  std::unique_ptr<KernelHeaderShim> shim(new KernelHeaderShim(buf.data()));

  for (const auto& [name, content] : EmbeddedKernelHeaders()) {
    Status st = MakeDirs(shim->dir_, name);
    if (!st.ok()) return st;
    st = WriteFile(shim->dir_ + "/" + name, content);
    if (!st.ok()) return st;
  }
  struct utsname un;
  ::uname(&un);
  char version_h[256];
  snprintf(version_h, sizeof(version_h),
           "/* PyPerf kernel-header shim: running kernel %s */\n"
           "#define LINUX_VERSION_CODE %u\n"
           "#define KERNEL_VERSION(a, b, c) (((a) << 16) + ((b) << 8) + ((c) > 255 ? 255 : (c)))\n",
           un.release, LinuxVersionCode(un.release));
  Status st = WriteFile(shim->dir_ + "/include/linux/version.h", version_h);
  if (!st.ok()) return st;

  if (const char* prev = std::getenv(kEnvName)) {
    shim->had_previous_env_ = true;
    shim->previous_env_ = prev;
  }
  ::setenv(kEnvName, shim->dir_.c_str(), 1);
  return shim;
}

KernelHeaderShim::~KernelHeaderShim() {
  if (had_previous_env_)
    ::setenv(kEnvName, previous_env_.c_str(), 1);
  else
    ::unsetenv(kEnvName);
  ::nftw(dir_.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS);
}

}  // namespace ebpf
