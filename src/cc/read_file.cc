// Reading a whole file: see read_file.h.
#include "read_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "unique_fd.h"

namespace ebpf {

int ReadFileInto(const char* path, std::string* out) {
  out->clear();
  UniqueFd fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (!fd) return errno;
  // Read straight into the string's own storage, growing it when full.
  size_t used = 0;
  if (out->capacity() < 4096) out->reserve(4096);
  out->resize(out->capacity());
  while (true) {
    if (used == out->size()) out->resize(out->size() * 2);
    ssize_t n = ::read(fd.get(), &(*out)[used], out->size() - used);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      out->resize(used);
      return err;
    }
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  out->resize(used);
  return 0;
}

Result<std::string> ReadFile(const std::string& path) {
  std::string text;
  int err = ReadFileInto(path.c_str(), &text);
  if (err != 0) return Status::Error(FileReadError(path, err));
  return text;
}

std::string FileReadError(const std::string& path, int err) {
  return "cannot read " + path + ": " + std::strerror(err);
}

}  // namespace ebpf
