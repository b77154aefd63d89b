// PythonFrameFormat: see PythonFrameFormat.h.
#include "PythonFrameFormat.h"

#include <algorithm>
#include <cctype>


namespace ebpf::pyperf {
namespace {

bool IsDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

// If a "pythonX[.Y][t]/" directory starts at `pos` and is preceded by "lib/" or
// "lib64/", returns the index just past its '/'; else npos.
size_t PythonLibDirEnd(std::string_view file, size_t pos) {
  auto preceded_by = [&](std::string_view dir) {
    return pos >= dir.size() && file.substr(pos - dir.size(), dir.size()) == dir;
  };
  if (!preceded_by("lib/") && !preceded_by("lib64/")) return std::string_view::npos;
  size_t i = pos + 6;  // past "python"
  size_t digits = i;
  while (i < file.size() && IsDigit(file[i])) ++i;
  if (i == digits) return std::string_view::npos;
  if (i < file.size() && file[i] == '.') {
    size_t minor = ++i;
    while (i < file.size() && IsDigit(file[i])) ++i;
    if (i == minor) return std::string_view::npos;
  }
  if (i < file.size() && file[i] == 't') ++i;  // free-threaded build
  if (i < file.size() && file[i] == '/') return i + 1;
  return std::string_view::npos;
}

// Index just past the last library-directory marker, or 0 if none.
size_t LibraryPrefixEnd(std::string_view file) {
  size_t end = 0;
  for (std::string_view marker : {"site-packages/", "dist-packages/"}) {
    size_t pos = file.rfind(marker);
    if (pos != std::string_view::npos) end = std::max(end, pos + marker.size());
  }
  for (size_t pos = file.find("python"); pos != std::string_view::npos;
       pos = file.find("python", pos + 1)) {
    size_t dir_end = PythonLibDirEnd(file, pos);
    if (dir_end != std::string_view::npos) end = std::max(end, dir_end);
  }
  return end;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

std::string PythonModuleName(std::string_view file) {
  if (file.size() >= 2 && file.front() == '<' && file.back() == '>') {
    constexpr std::string_view kFrozen = "<frozen ";
    if (file.substr(0, kFrozen.size()) == kFrozen)
      return std::string(file.substr(kFrozen.size(), file.size() - kFrozen.size() - 1));
    return std::string(file);
  }
  std::string_view rest = file.substr(LibraryPrefixEnd(file));
  while (true) {
    if (!rest.empty() && rest.front() == '/') {
      rest.remove_prefix(1);
    } else if (rest.substr(0, 2) == "./") {
      rest.remove_prefix(2);
    } else {
      break;
    }
  }
  if (EndsWith(rest, ".py")) rest.remove_suffix(3);
  std::string module(rest);
  std::replace(module.begin(), module.end(), '/', '.');
  constexpr std::string_view kInit = ".__init__";
  if (EndsWith(module, kInit)) module.resize(module.size() - kInit.size());
  return module;
}

}  // namespace ebpf::pyperf
