// Parsing of /proc/PID/maps and /proc/PID/stat; see proc_maps.h.
#include "proc_maps.h"

#include <dirent.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <iterator>

#include "read_file.h"

namespace ebpf {
namespace {

// The kernel's mark on a path whose file was unlinked after it was mapped (in
// maps) or exec'd (the exe link): removed here, once, and kept as a flag.
bool RemoveDeletedSuffix(std::string_view* path) {
  constexpr std::string_view kDeletedSuffix = " (deleted)";
  if (path->size() <= kDeletedSuffix.size() ||
      path->substr(path->size() - kDeletedSuffix.size()) != kDeletedSuffix) {
    return false;
  }
  path->remove_suffix(kDeletedSuffix.size());
  return true;
}

std::string ProcPath(pid_t pid, const char* entry) {
  return "/proc/" + std::to_string(pid) + "/" + entry;
}

// Reads a whole /proc file, saying when the process seems to have exited.
Result<std::string> ReadProcFile(const std::string& path) {
  std::string text;
  if (int err = ReadFileInto(path.c_str(), &text); err != 0) {
    return Status::Error(FileReadError(path, err) +
                         (err == ENOENT ? " (the process has exited?)" : ""));
  }
  return text;
}

// Cursor over one line of a maps file.
class FieldReader {
 public:
  explicit FieldReader(std::string_view line) : rest_(line) {}

  template <typename T>
  bool Hex(T* out, char terminator) {
    auto [ptr, ec] = std::from_chars(rest_.data(), rest_.data() + rest_.size(), *out, 16);
    if (ec != std::errc() || ptr == rest_.data()) return false;
    rest_.remove_prefix(static_cast<size_t>(ptr - rest_.data()));
    return Expect(terminator);
  }
  template <typename T>
  bool Dec(T* out) {
    auto [ptr, ec] = std::from_chars(rest_.data(), rest_.data() + rest_.size(), *out, 10);
    if (ec != std::errc() || ptr == rest_.data()) return false;
    rest_.remove_prefix(static_cast<size_t>(ptr - rest_.data()));
    return true;
  }
  bool Word(std::string* out) {
    size_t n = rest_.find(' ');
    if (n == 0 || n == std::string_view::npos) return false;
    out->assign(rest_.substr(0, n));
    rest_.remove_prefix(n + 1);
    return true;
  }
  bool Expect(char c) {
    if (rest_.empty() || rest_.front() != c) return false;
    rest_.remove_prefix(1);
    return true;
  }
  // Everything after the run of spaces that pads the inode column.
  std::string_view Tail() {
    size_t n = rest_.find_first_not_of(' ');
    return n == std::string_view::npos ? std::string_view() : rest_.substr(n);
  }

 private:
  std::string_view rest_;
};

std::string Hex(uint64_t v) {
  char buf[17];
  auto [ptr, ec] = std::to_chars(buf, buf + sizeof(buf), v, 16);
  (void)ec;
  return std::string(buf, ptr);
}

}  // namespace

bool ParseProcMapsLine(std::string_view line, MemoryMapping* m) {
  FieldReader r(line);
  if (!r.Hex(&m->start, '-') || !r.Hex(&m->end, ' ') || !r.Word(&m->perms) ||
      !r.Hex(&m->offset, ' ') || !r.Hex(&m->dev_major, ':') || !r.Hex(&m->dev_minor, ' ') ||
      !r.Dec(&m->inode)) {
    return false;
  }
  // The path may contain spaces; it is the rest of the line.
  std::string_view path = r.Tail();
  // Only a file mapping can have been deleted; other names stay as shown.
  m->deleted = m->inode != 0 && RemoveDeletedSuffix(&path);
  m->path.assign(path);
  return m->end >= m->start;
}

FileId MemoryMapping::file_id() const {
  return FileId{static_cast<uint64_t>(makedev(dev_major, dev_minor)), inode};
}

Result<std::vector<MemoryMapping>> ParseProcMaps(std::string_view text) {
  std::vector<MemoryMapping> mappings;
  mappings.reserve(static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1);
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    if (line.empty()) continue;
    MemoryMapping m;
    if (!ParseProcMapsLine(line, &m)) {
      return Status::Error("malformed maps line: '" + std::string(line) + "'");
    }
    mappings.push_back(std::move(m));
  }
  return mappings;
}

Result<std::vector<MemoryMapping>> ReadProcMaps(pid_t pid) {
  std::string path = ProcPath(pid, "maps");
  auto text = ReadProcFile(path);
  if (!text.ok()) return text.status();
  auto mappings = ParseProcMaps(*text);
  if (!mappings.ok()) return Status::Error(path + ": " + mappings.error());
  return mappings;
}

std::string MapFilesPath(pid_t pid, uint64_t start, uint64_t end) {
  // The kernel names these entries "%lx-%lx": lower-case hex, no padding.
  return ProcPath(pid, "map_files/") + Hex(start) + "-" + Hex(end);
}

Result<ProcessIdentity> ParseProcessIdentity(std::string_view text) {
  // comm (field 2) may hold spaces and parentheses: fields resume after the
  // last ')', one space apart.
  size_t close = text.rfind(')');
  if (close == std::string_view::npos) return Status::Error("no ')' after the command name");
  std::string_view rest = text.substr(close + 1);
  ProcessIdentity id;
  // The fields kept, in order, and where they go.
  const std::pair<int, uint64_t*> wanted[] = {{22, &id.start_time}, {26, &id.layout[0]},
                                              {27, &id.layout[1]},  {28, &id.layout[2]},
                                              {45, &id.layout[3]},  {47, &id.layout[4]}};
  size_t next = 0;
  for (int field = 3; next < std::size(wanted); ++field) {
    size_t start = rest.find_first_not_of(' ');
    if (start == std::string_view::npos || rest[start] == '\n') break;
    rest.remove_prefix(start);
    std::string_view word = rest.substr(0, rest.find_first_of(" \n"));
    rest.remove_prefix(word.size());
    if (field != wanted[next].first) continue;
    auto [ptr, ec] = std::from_chars(word.data(), word.data() + word.size(), *wanted[next].second);
    if (ec != std::errc() || ptr != word.data() + word.size()) {
      return Status::Error("field " + std::to_string(field) + " is not a number: '" +
                           std::string(word) + "'");
    }
    ++next;
  }
  if (next == 0) return Status::Error("too short: no start time (field 22)");
  return id;
}

Result<ProcessIdentity> ReadProcessIdentity(pid_t pid) {
  std::string path = ProcPath(pid, "stat");
  auto text = ReadProcFile(path);
  if (!text.ok()) return text.status();
  auto id = ParseProcessIdentity(*text);
  if (!id.ok()) return Status::Error("malformed " + path + ": " + id.error());
  return id;
}

Result<uint64_t> ReadProcessStartTime(pid_t pid) {
  auto id = ReadProcessIdentity(pid);
  if (!id.ok()) return id.status();
  return id->start_time;
}

Result<std::string> ReadProcessExePath(pid_t pid) {
  std::string path = ProcPath(pid, "exe");
  std::string target(4096, '\0');
  ssize_t n = ::readlink(path.c_str(), target.data(), target.size());
  if (n < 0) {
    return Status::Error("cannot read link " + path + ": " + std::strerror(errno) +
                         (errno == ENOENT ? " (kernel thread or exited process?)" : ""));
  }
  std::string_view exe(target.data(), static_cast<size_t>(n));
  RemoveDeletedSuffix(&exe);
  target.resize(exe.size());
  return target;
}

std::vector<pid_t> ListProcesses() {
  std::vector<pid_t> pids;
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return pids;
  while (struct dirent* e = ::readdir(dir)) {
    const char* name = e->d_name;
    pid_t pid = 0;
    auto [ptr, ec] = std::from_chars(name, name + std::strlen(name), pid, 10);
    if (ec == std::errc() && *ptr == '\0' && pid > 0) pids.push_back(pid);
  }
  ::closedir(dir);
  std::sort(pids.begin(), pids.end());
  return pids;
}

}  // namespace ebpf
