// The live and the recorded process; see target_process.h.
#include "target_process.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "process_memory.h"
#include "read_file.h"

namespace pyperf {
namespace {

// Opens `path` as seen under `root` ("" or "/" = the host's own files).
Result<UniqueFd> OpenUnderRoot(const std::string& root, const std::string& path) {
  std::string full = root.empty() || root == "/" ? path : root + path;
  UniqueFd fd(open(full.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return Status::Error("cannot open " + full + ": " + strerror(errno));
  return fd;
}

}  // namespace

LiveProcess::LiveProcess(pid_t pid)
    : TargetProcess(pid, "/proc/" + std::to_string(pid) + "/root"),
      maps_path_("/proc/" + std::to_string(pid) + "/maps"),
      stat_path_("/proc/" + std::to_string(pid) + "/stat") {}

Result<std::unique_ptr<LiveProcess>> LiveProcess::Attach(pid_t pid) {
  std::unique_ptr<LiveProcess> process(new LiveProcess(pid));  // private constructor
  if (int err = process->ReadIdentity(&process->identity_); err != 0) {
    return Status::Error(strerror(err));
  }
  return process;
}

int LiveProcess::ReadIdentity(ProcessIdentity* id) {
  if (int err = ReadFileInto(stat_path_.c_str(), &stat_text_); err != 0) return err;
  if (stat_text_.empty()) return ESRCH;
  auto parsed = ParseProcessIdentity(stat_text_);
  if (!parsed.ok()) return EINVAL;
  *id = *parsed;
  return 0;
}

Result<std::string_view> LiveProcess::ReadMaps(std::string* buffer) {
  if (int err = ReadFileInto(maps_path_.c_str(), buffer); err != 0) {
    return Status::Error(strerror(err));
  }
  if (buffer->empty()) return Status::Error("no mappings (process exited)");
  return std::string_view(*buffer);
}

TargetProcess::Identity LiveProcess::CheckIdentity() {
  ProcessIdentity now;
  if (ReadIdentity(&now) != 0) return Identity::kGone;
  return now == identity_ ? Identity::kSame : Identity::kReplaced;
}

Result<UniqueFd> LiveProcess::OpenMappedFile(uint64_t start, uint64_t end, uint64_t inode,
                                             const std::string& path) {
  // map_files names the mapped file itself: right even when the path was
  // replaced or deleted since, and inside containers (needs CAP_SYS_ADMIN).
  UniqueFd fd(open(MapFilesPath(pid(), start, end).c_str(), O_RDONLY | O_CLOEXEC));
  if (fd) return fd;
  auto opened = OpenUnderRoot(root(), path);
  if (!opened.ok()) return opened;
  struct stat st;
  if (fstat(opened->get(), &st) != 0 || static_cast<uint64_t>(st.st_ino) != inode) {
    return Status::Error(root() + path + " is no longer the mapped file");
  }
  return opened;
}

std::optional<TargetProcess::FileStamp> LiveProcess::MappedFileStamp(uint64_t start, uint64_t end) {
  struct stat st;
  if (stat(MapFilesPath(pid(), start, end).c_str(), &st) != 0) return std::nullopt;
  return FileStamp{static_cast<uint64_t>(st.st_size),
                   static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

bool LiveProcess::ReadMemory(uint64_t addr, void* out, size_t size) {
  return ReadProcessMemory(pid(), addr, out, size);
}

Result<UniqueFd> RecordedProcess::OpenMappedFile(uint64_t, uint64_t, uint64_t,
                                                 const std::string& path) {
  // The recording's copy: no inode to check it against.
  return OpenUnderRoot(root(), path);
}

}  // namespace pyperf
