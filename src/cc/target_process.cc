// The live and the recorded process; see target_process.h.
#include "target_process.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "process_memory.h"
#include "read_file.h"

namespace ebpf {

LiveProcess::LiveProcess(pid_t pid)
    : TargetProcess(pid, "/proc/" + std::to_string(pid) + "/root"),
      maps_path_("/proc/" + std::to_string(pid) + "/maps"),
      stat_path_("/proc/" + std::to_string(pid) + "/stat"),
      process_root_(ProcessRootDirectory(pid)) {}

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

Result<OpenedFile> LiveProcess::OpenMappedFile(uint64_t start, uint64_t end, uint64_t inode,
                                               const std::string& path) {
  MappedFileRequest request;
  request.pid = pid();
  request.start = start;
  request.end = end;
  request.inode = inode;
  request.maps_path = path;
  request.process_root = process_root_;
  return OpenProcessMappedFile(request);
}

std::optional<FileStamp> LiveProcess::MappedFileStamp(uint64_t start, uint64_t end) {
  struct stat st;
  if (stat(MapFilesPath(pid(), start, end).c_str(), &st) != 0) return std::nullopt;
  return FileStamp::Of(st);
}

bool LiveProcess::ReadMemory(uint64_t addr, void* out, size_t size) {
  return ReadProcessMemory(pid(), addr, out, size);
}

Result<OpenedFile> RecordedProcess::OpenMappedFile(uint64_t, uint64_t, uint64_t,
                                                   const std::string& path) {
  // The recording's copy: no inode to check it against. "" or "/" = the host's files.
  return OpenRegularFile(root().empty() || root() == "/" ? path : root() + path);
}

}  // namespace ebpf
