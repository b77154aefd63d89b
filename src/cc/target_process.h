// TargetProcess: what the native unwinder reads of one process (the text of
// its /proc/PID/maps, the files it maps, its memory) behind one interface, so
// that unwinding has one code path whether the process is
//  - live (LiveProcess): /proc and process_vm_readv, never ptrace; or
//  - recorded (RecordedProcess): a maps text and copies of the mapped files,
//    replayed after the process is gone (benchmarks, fixtures).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "mapped_file.h"
#include "proc_maps.h"
#include "status.h"

namespace ebpf {

class TargetProcess {
 public:
  virtual ~TargetProcess() = default;

  pid_t pid() const { return pid_; }
  // Prefix under which the process's files are reached: "/proc/PID/root" for
  // a live one (right inside containers), a recording's copies, "" = host.
  const std::string& root() const { return root_; }

  // The text of its /proc/PID/maps; *buffer holds it when it had to be read
  // (reused: no allocation once large enough). The error is a short reason.
  virtual Result<std::string_view> ReadMaps(std::string* buffer) = 0;

  // Whether the pid still runs the program image this object was made for.
  enum class Identity { kSame, kReplaced, kGone };
  virtual Identity CheckIdentity() = 0;
  // Whether its mappings can change under us (new code mapped, an exec): a
  // recording never does, so re-reading it cannot explain an unknown address.
  virtual bool can_change() const = 0;

  // Opens the file with inode `inode` mapped at [start, end) from `path` (as
  // its maps shows it), with its identity and stamp (the ElfImageCache key).
  virtual Result<OpenedFile> OpenMappedFile(uint64_t start, uint64_t end, uint64_t inode,
                                            const std::string& path) = 0;
  // The stamp (size and modification time among it) of the file mapped at
  // [start, end) now, when that can be told (to notice another file behind a
  // reused inode).
  virtual std::optional<FileStamp> MappedFileStamp(uint64_t start, uint64_t end) = 0;

  // Whether bytes of a mapped file's writable segments may stand for its
  // memory: not in a live process (its data has changed since), but in a
  // recording there is nothing better.
  virtual bool file_image_is_memory() const = 0;
  // Reads memory that neither the stack copy nor a file image holds; false
  // when it cannot (a recording has no such memory).
  virtual bool ReadMemory(uint64_t addr, void* out, size_t size) = 0;

 protected:
  TargetProcess(pid_t pid, std::string root) : pid_(pid), root_(std::move(root)) {}

 private:
  pid_t pid_;
  std::string root_;
};

// A running process, reached through /proc/PID.
class LiveProcess : public TargetProcess {
 public:
  // Reads its identity (/proc/PID/stat) now; an error (strerror text) if the
  // process cannot be read.
  static Result<std::unique_ptr<LiveProcess>> Attach(pid_t pid);

  Result<std::string_view> ReadMaps(std::string* buffer) override;
  Identity CheckIdentity() override;
  bool can_change() const override { return true; }
  // Through OpenProcessMappedFile (mapped_file.h).
  Result<OpenedFile> OpenMappedFile(uint64_t start, uint64_t end, uint64_t inode,
                                    const std::string& path) override;
  std::optional<FileStamp> MappedFileStamp(uint64_t start, uint64_t end) override;
  bool file_image_is_memory() const override { return false; }
  bool ReadMemory(uint64_t addr, void* out, size_t size) override;

 private:
  explicit LiveProcess(pid_t pid);
  // Reads /proc/PID/stat into stat_text_; errno or 0.
  int ReadIdentity(ProcessIdentity* id);

  std::string maps_path_, stat_path_;
  std::string process_root_;  // ProcessRootDirectory, read at Attach
  ProcessIdentity identity_;
  std::string stat_text_;  // reused by every CheckIdentity
};

// A recorded process: its maps text, and copies of its mapped files under a
// root directory ("" = the host's files, as they are now).
class RecordedProcess : public TargetProcess {
 public:
  RecordedProcess(pid_t pid, std::string maps_text, std::string root_dir)
      : TargetProcess(pid, std::move(root_dir)), maps_text_(std::move(maps_text)) {}

  Result<std::string_view> ReadMaps(std::string*) override { return std::string_view(maps_text_); }
  Identity CheckIdentity() override { return Identity::kSame; }
  bool can_change() const override { return false; }
  Result<OpenedFile> OpenMappedFile(uint64_t start, uint64_t end, uint64_t inode,
                                    const std::string& path) override;
  std::optional<FileStamp> MappedFileStamp(uint64_t, uint64_t) override { return std::nullopt; }
  bool file_image_is_memory() const override { return true; }
  bool ReadMemory(uint64_t, void*, size_t) override { return false; }

 private:
  std::string maps_text_;
};

}  // namespace ebpf
