// Detection of CPython processes and of what the profiler needs about each;
// see PythonProcess.h.
#include "PythonProcess.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "elf_file.h"
#include "elf_image_cache.h"

namespace ebpf::pyperf {

namespace {

// A PY_VERSION-looking string found in the read-only data.
struct VersionCandidate {
  PythonVersion version;
  bool whole_string = false;  // the string is just the version, not a merged tail
};

}  // namespace

// What one file says about the interpreter it may hold. Everything here is a
// property of the file, so it is shared by every process that maps it.
struct PythonProcessInspector::FileFacts {
  bool has_interpreter = false;
  std::vector<ElfLoadSegment> segments;
  std::optional<ElfSymbol> py_runtime, thread_state_current, interp_head, auto_interpreter_state,
      py_version, py_code_type;
  bool python2_api = false;  // defines PyString_FromString
  std::optional<PythonVersion> version_from_symbol;
  std::vector<VersionCandidate> version_strings;  // only read when Py_Version is absent
  std::string build_id;
};

namespace {

using FileFacts = PythonProcessInspector::FileFacts;

std::string_view Basename(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Parses digits at t[*pos] (at most 3: versions are small numbers).
bool ParseNumber(std::string_view t, size_t* pos, int* out) {
  size_t start = *pos;
  int value = 0;
  while (*pos < t.size() && IsDigit(t[*pos]) && *pos - start < 3)
    value = value * 10 + (t[(*pos)++] - '0');
  *out = value;
  return *pos > start && (*pos == t.size() || !IsDigit(t[*pos]));
}

// Whether `t` is exactly a PY_VERSION: X.Y.Z, then optionally a release level
// (a1, b2, rc1) and a '+' (built from a development tree).
bool ParseVersionString(std::string_view t, PythonVersion* v) {
  size_t pos = 0;
  if (!ParseNumber(t, &pos, &v->major) || pos >= t.size() || t[pos++] != '.') return false;
  if (!ParseNumber(t, &pos, &v->minor) || pos >= t.size() || t[pos++] != '.') return false;
  if (!ParseNumber(t, &pos, &v->micro)) return false;
  if (pos < t.size() && (t[pos] == 'a' || t[pos] == 'b' || t.substr(pos, 2) == "rc")) {
    pos += t[pos] == 'r' ? 2 : 1;
    int serial;
    if (!ParseNumber(t, &pos, &serial)) return false;
  }
  if (pos < t.size() && t[pos] == '+') ++pos;
  return pos == t.size();
}

// The version a string ends with, if any. The linker merges a string into
// the tail of a longer one that ends the same way, so pyenv's PY_VERSION
// "3.10.13" is the tail of "/root/.pyenv/versions/3.10.13": accept a suffix
// that does not start in the middle of a number.
std::optional<VersionCandidate> VersionAtEnd(std::string_view s) {
  if (s.empty() || !(IsDigit(s.back()) || s.back() == '+')) return std::nullopt;
  // The version token can only hold digits, '.', 'a', 'b', 'r', 'c', '+'.
  size_t start = s.size();
  while (start > 0 && start + 16 > s.size() &&
         (IsDigit(s[start - 1]) || std::strchr(".abrc+", s[start - 1]) != nullptr)) {
    --start;
  }
  for (; start + 5 <= s.size(); ++start) {
    if (start > 0 && (IsDigit(s[start - 1]) || s[start - 1] == '.')) continue;
    PythonVersion v;
    if (ParseVersionString(s.substr(start), &v)) return VersionCandidate{v, start == 0};
  }
  return std::nullopt;
}

// Major and minor from a file name such as libpython3.10.so.1.0,
// libpython3.6m.so or python2.7.
std::optional<std::pair<int, int>> VersionFromFileName(std::string_view path) {
  std::string_view name = Basename(path);
  for (std::string_view prefix : {"libpython", "python"}) {
    if (!StartsWith(name, prefix)) continue;
    std::string_view rest = name.substr(prefix.size());
    size_t pos = 0;
    int major, minor;
    if (ParseNumber(rest, &pos, &major) && pos < rest.size() && rest[pos++] == '.' &&
        ParseNumber(rest, &pos, &minor)) {
      return std::make_pair(major, minor);
    }
  }
  return std::nullopt;
}

// Every 2.x/3.x version string in the read-only data, whole or as a tail.
std::vector<VersionCandidate> VersionCandidates(const ElfFile& elf) {
  std::vector<VersionCandidate> found;
  elf.ForEachReadOnlyString([&](const ElfString& s) {
    auto c = VersionAtEnd(s.text);
    if (c && (c->version.major == 2 || c->version.major == 3)) found.push_back(*c);
    return true;
  });
  return found;
}

// Which versions the symbols allow: a version string from an unrelated
// component (unicodedata's "3.2.0" in a static build) must not win.
bool ConsistentWithSymbols(const FileFacts& facts, const PythonVersion& v) {
  if (facts.py_version) return v.major == 3 && v.minor >= 11;
  if (facts.py_runtime) return v.major == 3 && v.minor >= 7 && v.minor <= 10;
  if (facts.python2_api) return v.major == 2;
  return v.major == 3 && v.minor >= 3 && v.minor <= 6;
}

Result<PythonVersion> ChooseVersion(const FileFacts& facts, const std::string& module_path) {
  if (facts.version_from_symbol) return *facts.version_from_symbol;
  auto from_name = VersionFromFileName(module_path);
  std::vector<VersionCandidate> kept;
  for (const VersionCandidate& c : facts.version_strings) {
    if (!ConsistentWithSymbols(facts, c.version)) continue;
    if (from_name &&
        (c.version.major != from_name->first || c.version.minor != from_name->second)) {
      continue;
    }
    kept.push_back(c);
  }
  auto distinct = [](const std::vector<VersionCandidate>& cs) {
    std::vector<PythonVersion> vs;
    for (const auto& c : cs) {
      if (std::find(vs.begin(), vs.end(), c.version) == vs.end()) vs.push_back(c.version);
    }
    return vs;
  };
  std::vector<PythonVersion> versions = distinct(kept);
  if (versions.size() > 1) {
    // A string that is only the version beats one merged into a longer string.
    std::vector<VersionCandidate> whole;
    for (const auto& c : kept) {
      if (c.whole_string) whole.push_back(c);
    }
    if (distinct(whole).size() == 1) versions = distinct(whole);
  }
  if (versions.size() == 1) return versions[0];
  if (versions.empty()) {
    return Status::Error("no Python version string found in " + module_path);
  }
  std::string list;
  for (const auto& v : versions) list += (list.empty() ? "" : ", ") + v.ToString();
  return Status::Error("ambiguous Python version in " + module_path + ": " + list);
}

// Decodes an unsigned integer of 4 or 8 bytes in the file's byte order.
uint64_t DecodeUnsigned(const unsigned char* bytes, size_t size, bool little_endian) {
  uint64_t value = 0;
  for (size_t i = 0; i < size; ++i) {
    size_t shift = little_endian ? i : size - 1 - i;
    value |= static_cast<uint64_t>(bytes[i]) << (8 * shift);
  }
  return value;
}

FileFacts ReadFileFacts(const ElfFile& elf) {
  FileFacts facts;
  auto syms =
      elf.FindSymbols({"_PyRuntime", "_PyThreadState_Current", "interp_head",
                       "autoInterpreterState", "Py_Version", "PyString_FromString", "PyCode_Type"});
  facts.py_runtime = syms[0];
  facts.thread_state_current = syms[1];
  facts.interp_head = syms[2];
  facts.auto_interpreter_state = syms[3];
  facts.py_version = syms[4];
  facts.python2_api = syms[5].has_value();
  facts.py_code_type = syms[6];
  facts.has_interpreter = facts.py_runtime || facts.thread_state_current;
  if (!facts.has_interpreter) return facts;  // cached as "not Python"

  facts.segments = elf.load_segments();
  facts.build_id = elf.BuildId().value_or("");

  if (facts.py_version && (facts.py_version->size == 4 || facts.py_version->size == 8)) {
    // Py_Version is a const initialised to PY_VERSION_HEX, e.g. 0x030b07f0.
    unsigned char bytes[8];
    size_t size = facts.py_version->size;
    if (elf.ReadAtVirtualAddress(facts.py_version->value, bytes, size).ok()) {
      uint64_t hex = DecodeUnsigned(bytes, size, elf.is_little_endian());
      PythonVersion v = PythonVersion::FromHex(hex);
      if (v.major == 3 && v.minor >= 11) facts.version_from_symbol = v;
    }
  }
  if (!facts.version_from_symbol) {
    facts.version_strings = VersionCandidates(elf);
  }
  return facts;
}

std::optional<uint64_t> AddBias(const std::optional<ElfSymbol>& sym, uint64_t bias) {
  if (!sym) return std::nullopt;
  return bias + sym->value;
}

}  // namespace

std::vector<PythonVersion> FindPythonVersionStrings(const ElfFile& elf) {
  std::vector<PythonVersion> versions;
  for (const VersionCandidate& c : VersionCandidates(elf)) versions.push_back(c.version);
  return versions;
}

PythonProcessInspector::PythonProcessInspector(size_t max_cached_files)
    : max_cached_files_(max_cached_files) {}

PythonProcessInspector::~PythonProcessInspector() = default;

Result<std::shared_ptr<const FileFacts>> PythonProcessInspector::FactsFor(
    pid_t pid, const MemoryMapping& mapping, const std::string& process_root,
    std::string* host_path) {
  MappedFileRequest request = MappedFileRequest::For(pid, mapping, process_root);
  // overlayfs may show maps another inode than stat does: a path that exists
  // but does not match is still better than nothing.
  request.accept_other_inode = true;
  auto file = OpenProcessMappedFile(request);
  if (!file.ok()) return file.status();
  *host_path = file->path;
  if (auto it = cache_.find(file->stamp); it != cache_.end()) return it->second;

  // The file's one parse, shared with native symbolization (elf_image_cache.h).
  auto image = ElfImageCache::Shared().Get(*file);
  if (!image.ok()) return image.status();  // not cached: may be transient
  auto shared = std::make_shared<const FileFacts>(ReadFileFacts(ElfFile(file->path, *image)));
  if (cache_.size() >= max_cached_files_) cache_.clear();  // crude bound; refills on the next scan
  // Keyed by what was parsed: the file may have been rewritten since it was opened.
  if (max_cached_files_ > 0) cache_.emplace((*image)->file(), shared);
  return shared;
}

Result<PythonProcessInfo> PythonProcessInspector::Inspect(pid_t pid) {
  auto start_time = ReadProcessStartTime(pid);
  if (!start_time.ok()) return start_time.status();
  auto exe = ReadProcessExePath(pid);
  return Inspect(pid, *start_time, exe.ok() ? *exe : std::string());
}

Result<PythonProcessInfo> PythonProcessInspector::Inspect(pid_t pid, uint64_t start_time,
                                                          const std::string& exe) {
  auto maps = ReadProcMaps(pid);
  if (!maps.ok()) return maps.status();
  if (maps->empty()) {
    return Status::Error("pid " + std::to_string(pid) +
                         " has no mappings (kernel thread or zombie)");
  }

  // Candidates, in the order the dynamic linker binds symbols: the executable
  // first (a static interpreter in it wins over a libpython an extension may
  // drag in), then libpython*.so*, then python* files (an interpreter started
  // as `ld.so /usr/bin/python3`), those only where mapped executable: a
  // process that maps libpython just to read it (PyPerf's own ELF cache, a
  // packager) runs no interpreter from it. Other files are never opened.
  const MemoryMapping* main_exe = nullptr;
  if (!exe.empty()) {
    for (const auto& m : *maps) {
      if (m.is_file() && m.path == exe) {
        main_exe = &m;
        break;
      }
    }
  }
  if (!main_exe) {
    for (const auto& m : *maps) {
      if (m.is_file()) {
        main_exe = &m;
        break;
      }
    }
  }
  std::string process_root = ProcessRootDirectory(pid);
  std::vector<const MemoryMapping*> candidates;
  auto add = [&](const MemoryMapping& m) {
    for (const MemoryMapping* c : candidates) {
      if (c->same_file(m) && c->path == m.path) return;
    }
    candidates.push_back(&m);
  };
  if (main_exe) add(*main_exe);
  for (const auto& m : *maps) {
    std::string_view name = Basename(m.path);
    if (m.is_file() && m.executable() && StartsWith(name, "libpython") &&
        name.find(".so") != std::string_view::npos) {
      add(m);
    }
  }
  for (const auto& m : *maps) {
    if (m.is_file() && m.executable() && StartsWith(Basename(m.path), "python")) add(m);
  }

  std::string read_errors;
  for (const MemoryMapping* candidate : candidates) {
    std::string host_path;
    auto facts_or = FactsFor(pid, *candidate, process_root, &host_path);
    if (!facts_or.ok()) {
      read_errors += (read_errors.empty() ? ": " : "; ") + facts_or.error();
      continue;
    }
    const FileFacts& facts = **facts_or;
    if (!facts.has_interpreter) continue;

    PythonProcessInfo info;
    info.pid = pid;
    info.start_time = start_time;
    PythonModule& module = info.module;
    module.host_path = host_path;
    module.path = PathInProcess(candidate->path, process_root);
    module.deleted = candidate->deleted;
    module.is_main_executable = main_exe && main_exe->same_file(*candidate);
    module.build_id = facts.build_id;
    module.start = UINT64_MAX;
    std::optional<uint64_t> bias;
    for (const auto& m : *maps) {  // address order: the first segment's mapping comes first
      if (!m.same_file(*candidate) || m.path != candidate->path) continue;
      module.start = std::min(module.start, m.start);
      if (!bias && m.perms[0] != '-') bias = ComputeLoadBias(facts.segments, m.start, m.offset);
    }
    if (!bias) {
      return Status::Error("cannot work out the load address of " + candidate->path + " in pid " +
                           std::to_string(pid) + ": no mapping starts a PT_LOAD segment");
    }
    module.load_bias = *bias;

    auto version = ChooseVersion(facts, candidate->path);
    if (!version.ok()) return version.status();
    info.version = *version;
    info.version_source = facts.version_from_symbol ? PythonVersionSource::kPyVersionSymbol
                                                    : PythonVersionSource::kVersionString;

    info.symbols.py_runtime = AddBias(facts.py_runtime, *bias);
    info.symbols.thread_state_current = AddBias(facts.thread_state_current, *bias);
    info.symbols.interp_head = AddBias(facts.interp_head, *bias);
    info.symbols.auto_interpreter_state = AddBias(facts.auto_interpreter_state, *bias);
    info.symbols.py_version = AddBias(facts.py_version, *bias);
    info.symbols.py_code_type = AddBias(facts.py_code_type, *bias);

    // The pid may have exited and been reused while we read.
    auto start_again = ReadProcessStartTime(pid);
    if (!start_again.ok() || *start_again != start_time) {
      return Status::Error("pid " + std::to_string(pid) + " exited during inspection");
    }
    return info;
  }
  if (!read_errors.empty()) {
    // Possibly Python, but a candidate file could not be read: say so rather
    // than calling it "not Python".
    return Status::Error("cannot inspect pid " + std::to_string(pid) + read_errors);
  }
  std::string exe_name = main_exe ? main_exe->path : "(no executable mapping)";
  return Status::Error("not a Python process: neither " + exe_name +
                       " nor a mapped libpython holds a CPython interpreter");
}

std::vector<PythonProcessInfo> PythonProcessInspector::FindPythonProcesses() {
  std::vector<PythonProcessInfo> found;
  for (pid_t pid : ListProcesses()) {
    auto info = Inspect(pid);
    if (info.ok()) found.push_back(std::move(info).value());
  }
  return found;
}

Result<PythonProcessInfo> InspectPythonProcess(pid_t pid) {
  PythonProcessInspector inspector;
  return inspector.Inspect(pid);
}

}  // namespace ebpf::pyperf
