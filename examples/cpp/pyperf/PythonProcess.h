// PythonProcess: finds out, read-only, whether a process runs CPython and what
// the profiler needs to know about it: which module holds the interpreter
// (libpython*.so* or the executable itself, so embedders such as uWSGI count),
// where it is loaded, the exact version, and the runtime addresses of the
// interpreter's global symbols. Only /proc and the mapped files are read;
// the target is never ptraced or written to.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "PythonVersion.h"
#include "mapped_file.h"
#include "proc_maps.h"
#include "status.h"

namespace ebpf {
class ElfFile;
}  // namespace ebpf

namespace ebpf::pyperf {

// The file that holds the interpreter, as mapped into one process.
struct PythonModule {
  std::string host_path;  // open this from the host: /proc/PID/root/..., the chroot's path,
                          // or /proc/PID/map_files/...
  std::string path;       // the path as the process sees it (in its mount namespace and root)
  bool deleted = false;   // unlinked since it was mapped (opened through map_files)
  bool is_main_executable = false;  // interpreter linked into the executable
  uint64_t start = 0;               // lowest address the module is mapped at
  uint64_t load_bias = 0;           // runtime address = load_bias + symbol value in the file
  std::string build_id;             // GNU build-id in hex, "" if the file has none
};

// Runtime addresses (load bias applied) of the interpreter's globals; nullopt
// when the module does not define the symbol (by version, or stripped).
struct PythonSymbolAddresses {
  std::optional<uint64_t> py_runtime;              // _PyRuntime (3.7+)
  std::optional<uint64_t> thread_state_current;    // _PyThreadState_Current (2.7, 3.6)
  std::optional<uint64_t> interp_head;             // static, .symtab only (2.7, 3.6)
  std::optional<uint64_t> auto_interpreter_state;  // static, .symtab only (2.7, 3.6)
  std::optional<uint64_t> py_version;              // Py_Version (3.11+)
  std::optional<uint64_t> py_code_type;            // PyCode_Type (all versions)
};

enum class PythonVersionSource {
  kPyVersionSymbol,  // the value of Py_Version read from the file (3.11+)
  kVersionString,    // the PY_VERSION string embedded in the read-only data
};

struct PythonProcessInfo {
  pid_t pid = 0;
  uint64_t start_time = 0;  // /proc/PID/stat starttime: (pid, start_time) names the process
  PythonVersion version;
  PythonVersionSource version_source = PythonVersionSource::kPyVersionSymbol;
  PythonModule module;
  PythonSymbolAddresses symbols;
};

// The PY_VERSION-like strings (2.x.y or 3.x.y, with an optional a1/b2/rc1 and
// '+') in `elf`'s read-only data, including those the linker merged into the
// tail of a longer string. Not all are the interpreter's: a static build also
// holds unicodedata's "3.2.0". Exposed for tests and diagnostics.
std::vector<PythonVersion> FindPythonVersionStrings(const ElfFile& elf);

// Inspects one process without caching. A process that does not run CPython
// (or that exited, or cannot be read) gives an error with a short reason;
// callers scanning many processes just skip those.
Result<PythonProcessInfo> InspectPythonProcess(pid_t pid);

// The same with a cache of what was learnt from each file, keyed by the file's
// identity and stamp (device, inode, size, mtime), so that a periodic scan of
// thousands of processes reads each distinct executable and libpython once.
// Files are opened by OpenProcessMappedFile and parsed through the
// ElfImageCache that native symbolization shares. Only the
// executable and mapped files named libpython*/python* are ever opened. Not
// thread-safe: use one inspector per thread.
class PythonProcessInspector {
 public:
  explicit PythonProcessInspector(size_t max_cached_files = 4096);
  ~PythonProcessInspector();
  PythonProcessInspector(const PythonProcessInspector&) = delete;
  PythonProcessInspector& operator=(const PythonProcessInspector&) = delete;

  Result<PythonProcessInfo> Inspect(pid_t pid);
  // The same for a caller that has just read the process's start time and
  // executable path (ProcessTracker, once per process and rescan): they are
  // not read again, but for the start time once more at the end, which tells
  // that the pid was not reused while its files were read.
  Result<PythonProcessInfo> Inspect(pid_t pid, uint64_t start_time, const std::string& exe);

  // Every CPython process on the host (ListProcesses + Inspect, errors skipped).
  std::vector<PythonProcessInfo> FindPythonProcesses();

  size_t cached_files() const { return cache_.size(); }

  // What one file tells about the interpreter it may hold (opaque here).
  struct FileFacts;

 private:
  // Facts for the file mapped by `mapping`, from the cache or by reading it;
  // *host_path is set to the path it was opened through.
  Result<std::shared_ptr<const FileFacts>> FactsFor(pid_t pid, const MemoryMapping& mapping,
                                                    const std::string& process_root,
                                                    std::string* host_path);

  size_t max_cached_files_;
  std::unordered_map<FileStamp, std::shared_ptr<const FileFacts>, FileStampHash> cache_;
};

}  // namespace ebpf::pyperf
