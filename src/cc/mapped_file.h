// Opening the files a process maps, from the host: the one way PyPerf opens a
// mapped file, whether to detect Python in it or to unwind and name native
// frames. Containers (another mount namespace) are reached through
// /proc/PID/root, a chroot's files also through the path maps shows us, and a
// deleted or replaced file through /proc/PID/map_files. What is opened is a
// regular file, owned by an fd, with its identity and stamp from fstat: the
// key of the ELF cache (elf_image_cache.h).
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "file_id.h"
#include "proc_maps.h"
#include "status.h"
#include "unique_fd.h"

namespace ebpf {

// An open file's identity (device, inode) and what tells another file behind
// the same inode or a file rewritten in place (size, modification time), as
// fstat gives them. All zero for an image that has no file.
struct FileStamp {
  uint64_t dev = 0;
  uint64_t ino = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;

  static FileStamp Of(const struct stat& st);
  bool operator==(const FileStamp& o) const {
    return dev == o.dev && ino == o.ino && size == o.size && mtime_ns == o.mtime_ns;
  }
  bool operator!=(const FileStamp& o) const { return !(*this == o); }
  // The same file (device and inode), whatever its size and time say.
  bool SameFile(const FileStamp& o) const { return ino != 0 && dev == o.dev && ino == o.ino; }
};
struct FileStampHash {
  size_t operator()(const FileStamp& s) const {
    return MixHash(FileIdHash()(FileId{s.dev, s.ino}) ^ s.size * 0x9e3779b97f4a7c15ULL ^
                   static_cast<uint64_t>(s.mtime_ns));
  }
};

// A regular file opened read-only, and what fstat said of it then.
struct OpenedFile {
  UniqueFd fd;
  std::string path;  // the path it was opened through
  FileStamp stamp;
};

// Opens `path` read-only; anything but a regular file is an error, and a FIFO
// never blocks the open. Errors name the path and the reason.
Result<OpenedFile> OpenRegularFile(const std::string& path);

// Which file to open: one mapping of one process, as /proc/PID/maps shows it.
struct MappedFileRequest {
  pid_t pid = 0;
  uint64_t start = 0, end = 0;  // the mapping: names its /proc/PID/map_files entry
  uint64_t inode = 0;           // the mapped file's inode
  std::string_view maps_path;   // the path maps shows us, without " (deleted)"
  bool deleted = false;         // maps said " (deleted)": its path names no file or another
  // The process's root directory as the host sees it (ProcessRootDirectory):
  // "/" but for a chrooted process.
  std::string_view process_root = "/";
  // Where no path leads to the mapped inode, take the first file found: on
  // overlayfs maps may show the inode of the layer below, not the one stat
  // gives. Otherwise that is an error (the path now names another file).
  bool accept_other_inode = false;

  // The request for `mapping` of `pid` (which it views: keep it alive).
  static MappedFileRequest For(pid_t pid, const MemoryMapping& mapping,
                               std::string_view process_root = "/");
};

// Opens the file a process maps. Tries, in order, and takes the first whose
// inode is the mapped one:
//  1. /proc/PID/root + the path as the process sees it (right inside a
//     container's mount namespace and a chroot);
//  2. the path maps shows us, for a chrooted process (the host reaches the
//     chroot's files from its own root);
//  3. /proc/PID/map_files/START-END: the very file mapped, even deleted or
//     replaced since (needs CAP_SYS_ADMIN).
// 1 and 2 are skipped for a deleted file. Errors name the file, the pid and
// why (with what privilege would help).
Result<OpenedFile> OpenProcessMappedFile(const MappedFileRequest& request);

// The directory a process has as its root, as the host sees it: "/" for most,
// the chroot directory for a chrooted process; "/" when it cannot be read or
// lies outside our own root (a container's).
std::string ProcessRootDirectory(pid_t pid);

// /proc/PID/maps names files relative to the reader's root, so a chrooted
// process's files carry the chroot directory: this strips it to give the path
// the process itself uses. Files of a container's own mount namespace, which
// our root cannot reach, are already shown as the process sees them.
std::string PathInProcess(std::string_view maps_path, std::string_view process_root);

}  // namespace ebpf
