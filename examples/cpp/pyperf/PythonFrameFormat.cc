// PythonFrameFormat: see PythonFrameFormat.h.
#include "PythonFrameFormat.h"

#include <algorithm>
#include <cctype>

#include "FrameSpelling.h"

namespace pyperf {
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

std::string FormatPythonFrame(const std::string& file, const std::string& function,
                              const std::string& class_name, int line) {
  std::string module = PythonModuleName(file);
  std::string line_text = std::to_string(line);
  std::string out;
  out.reserve(module.size() + class_name.size() + function.size() + file.size() + line_text.size() +
              6 + kPythonSuffix.size());
  for (std::string_view prefix : {std::string_view(module), std::string_view(class_name)}) {
    if (prefix.empty()) continue;
    AppendFrameText(prefix, &out);
    out.push_back('.');
  }
  AppendFrameText(function, &out);
  out.append(" (");
  AppendFrameText(file, &out);
  out.append(":").append(line_text).append(")").append(kPythonSuffix);
  return out;
}

bool ParsePythonFrameText(std::string_view text, PythonFrameParts* out) {
  if (text.empty() || text.back() != ')') return false;
  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return false;
  std::string_view digits = text.substr(colon + 1, text.size() - colon - 2);
  if (digits.empty() || digits.size() > 9) return false;
  int line = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    line = line * 10 + (c - '0');
  }
  std::string module;
  for (size_t open = text.find(" ("); open != std::string_view::npos && open < colon;
       open = text.find(" (", open + 1)) {
    std::string_view name = text.substr(0, open);
    std::string_view file = text.substr(open + 2, colon - open - 2);
    module.clear();
    AppendFrameText(PythonModuleName(file), &module);
    bool matches =
        module.empty() || (name.size() > module.size() && name.substr(0, module.size()) == module &&
                           name[module.size()] == '.');
    if (!matches) continue;
    out->name = name;
    out->file = file;
    out->line = line;
    return true;
  }
  return false;
}

}  // namespace pyperf
