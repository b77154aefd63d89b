// Opening a process's mapped files; see mapped_file.h.
#include "mapped_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

namespace ebpf {

FileStamp FileStamp::Of(const struct stat& st) {
  return FileStamp{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
                   static_cast<uint64_t>(st.st_size),
                   static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

namespace {

// Opens `path` read-only as a regular file into *out: 0, or the errno of
// what failed (ENODEV for anything but a regular file).
int OpenRegular(const std::string& path, OpenedFile* out) {
  // O_NONBLOCK: the path may name a FIFO by now (a process renaming its
  // files); it is refused below, and the open must not wait for a writer.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd) return errno;
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return errno;
  if (!S_ISREG(st.st_mode)) return ENODEV;
  *out = OpenedFile{std::move(fd), path, FileStamp::Of(st)};
  return 0;
}

std::string OpenError(const std::string& path, int err) {
  return "cannot open " + path + ": " +
         (err == ENODEV ? std::string("not a regular file") : std::strerror(err));
}

}  // namespace

Result<OpenedFile> OpenRegularFile(const std::string& path) {
  OpenedFile file;
  if (int err = OpenRegular(path, &file); err != 0) return Status::Error(OpenError(path, err));
  return file;
}

MappedFileRequest MappedFileRequest::For(pid_t pid, const MemoryMapping& mapping,
                                         std::string_view process_root) {
  MappedFileRequest r;
  r.pid = pid;
  r.start = mapping.start;
  r.end = mapping.end;
  r.inode = mapping.inode;
  r.maps_path = mapping.path;
  r.deleted = mapping.deleted;
  r.process_root = process_root;
  return r;
}

Result<OpenedFile> OpenProcessMappedFile(const MappedFileRequest& r) {
  std::string candidates[3];
  size_t n = 0;
  if (!r.deleted) {
    candidates[n++] =
        "/proc/" + std::to_string(r.pid) + "/root" + PathInProcess(r.maps_path, r.process_root);
    if (r.process_root != "/") candidates[n++] = std::string(r.maps_path);
  }
  candidates[n++] = MapFilesPath(r.pid, r.start, r.end);

  std::optional<OpenedFile> other_inode;
  std::string why;  // what each attempt found
  int last_errno = 0;
  for (size_t i = 0; i < n; ++i) {
    OpenedFile file;
    if (!why.empty()) why += "; ";
    if (int err = OpenRegular(candidates[i], &file); err != 0) {
      last_errno = err;
      why += OpenError(candidates[i], err);
      continue;
    }
    last_errno = 0;
    if (file.stamp.ino == r.inode) return file;
    why += candidates[i] + " is inode " + std::to_string(file.stamp.ino) + ", not the mapped " +
           std::to_string(r.inode);
    if (!other_inode) other_inode = std::move(file);
  }
  if (r.accept_other_inode && other_inode) return std::move(*other_inode);
  // The last attempt is map_files, which needs more privilege than the paths.
  bool needs_privilege = last_errno == EPERM || last_errno == EACCES;
  return Status::Error("cannot open " + std::string(r.maps_path) + (r.deleted ? " (deleted)" : "") +
                       " mapped by pid " + std::to_string(r.pid) + ": " + why +
                       (needs_privilege ? " (map_files needs CAP_SYS_ADMIN)" : ""));
}

std::string ProcessRootDirectory(pid_t pid) {
  char buf[4096];
  std::string link = "/proc/" + std::to_string(pid) + "/root";
  ssize_t n = ::readlink(link.c_str(), buf, sizeof(buf) - 1);
  if (n <= 0) return "/";
  std::string root(buf, static_cast<size_t>(n));
  // A root outside our own view reads as e.g. "/ (deleted)" or a relative
  // path: nothing to strip then.
  if (root.empty() || root[0] != '/' || root.find(" (deleted)") != std::string::npos) return "/";
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  return root;
}

std::string PathInProcess(std::string_view maps_path, std::string_view process_root) {
  if (process_root == "/" || maps_path.size() <= process_root.size() ||
      maps_path.compare(0, process_root.size(), process_root) != 0 ||
      maps_path[process_root.size()] != '/') {
    return std::string(maps_path);
  }
  return std::string(maps_path.substr(process_root.size()));
}

}  // namespace ebpf
