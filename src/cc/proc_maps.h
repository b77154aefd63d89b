// Process mappings and identity from /proc: parse /proc/PID/maps, the process
// identity from /proc/PID/stat (to tell a reused pid or an exec from the same
// process) and the list of pids. Read-only; knows nothing about Python.
// Opening a mapped file is mapped_file.h's.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "file_id.h"
#include "status.h"

namespace ebpf {

// One line of /proc/PID/maps.
struct MemoryMapping {
  uint64_t start = 0;
  uint64_t end = 0;     // exclusive
  uint64_t offset = 0;  // file offset of `start`
  uint32_t dev_major = 0;
  uint32_t dev_minor = 0;
  uint64_t inode = 0;    // 0 for anonymous mappings
  std::string perms;     // e.g. "r-xp"
  std::string path;      // as the process sees it, without " (deleted)"; "" if anonymous,
                         // "[heap]", "[stack]", "[vdso]", ... for special mappings
  bool deleted = false;  // the file was unlinked after it was mapped

  uint64_t size() const { return end - start; }
  bool contains(uint64_t addr) const { return addr >= start && addr < end; }
  bool readable() const { return perms.size() > 0 && perms[0] == 'r'; }
  bool writable() const { return perms.size() > 1 && perms[1] == 'w'; }
  bool executable() const { return perms.size() > 2 && perms[2] == 'x'; }
  // Backed by a file (a path starting with '/' and a non-zero inode).
  bool is_file() const { return inode != 0 && !path.empty() && path[0] == '/'; }
  // The file's identity, the key of the caches shared by the processes mapping it.
  FileId file_id() const;
  // Same file as `other` (device and inode), whatever the path says.
  bool same_file(const MemoryMapping& other) const {
    return inode == other.inode && dev_major == other.dev_major && dev_minor == other.dev_minor;
  }
};

// Parses one line of a maps file (or a mapping's first line in smaps) into
// *m; false if it is not one.
bool ParseProcMapsLine(std::string_view line, MemoryMapping* m);

// Parses the text of a maps file (exposed for tests). Lines that do not parse
// make the whole result an error naming the line.
Result<std::vector<MemoryMapping>> ParseProcMaps(std::string_view text);

// The mappings of `pid`, in address order. A kernel thread or zombie gives an
// empty vector; a pid that does not exist or cannot be read gives an error.
Result<std::vector<MemoryMapping>> ReadProcMaps(pid_t pid);

// "/proc/PID/map_files/START-END": names the very file mapped at [start, end),
// even when it was deleted or replaced (needs CAP_SYS_ADMIN). To open a mapped
// file, see OpenProcessMappedFile (mapped_file.h).
std::string MapFilesPath(pid_t pid, uint64_t start, uint64_t end);

// What /proc/PID/stat says about which program image a pid runs: its start
// time (a reused pid has another) and where exec placed its code, stack, data
// and heap (an exec changes these, ASLR or not, unless the very same layout is
// recreated).
struct ProcessIdentity {
  uint64_t start_time = 0;  // field 22: clock ticks since boot
  // startcode, endcode, startstack, start_data, start_brk (fields 26, 27, 28,
  // 45, 47); 0 where the kernel hides them or the line ends earlier.
  std::array<uint64_t, 5> layout{};
  bool operator==(const ProcessIdentity& o) const {
    return start_time == o.start_time && layout == o.layout;
  }
  bool operator!=(const ProcessIdentity& o) const { return !(*this == o); }
};

// Parses the text of a /proc/PID/stat file (exposed for callers that read it
// into a reused buffer, and for tests).
Result<ProcessIdentity> ParseProcessIdentity(std::string_view stat_text);
Result<ProcessIdentity> ReadProcessIdentity(pid_t pid);

// Start time of `pid` since boot, in clock ticks (field 22 of /proc/PID/stat).
// A (pid, start time) pair names one process even when pids are reused.
Result<uint64_t> ReadProcessStartTime(pid_t pid);

// The target of /proc/PID/exe as the process sees it, without " (deleted)".
Result<std::string> ReadProcessExePath(pid_t pid);

// Every pid in /proc (processes, not threads), ascending.
std::vector<pid_t> ListProcesses();

}  // namespace ebpf
