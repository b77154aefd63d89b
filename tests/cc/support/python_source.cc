// A Python workload's source and where its functions are: see python_source.h.
#include "support/python_source.h"

#include <fstream>

namespace pyperf_test {

PythonSource::PythonSource(const std::string& path) : path_(path) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) lines_.push_back(line);
}

int PythonSource::DefLine(const std::string& function) const {
  for (size_t i = 0; i < lines_.size(); ++i)
    if (Stripped(i + 1).rfind("def " + function + "(", 0) == 0) return static_cast<int>(i) + 1;
  return 0;
}

int PythonSource::FirstLine(const std::string& function) const {
  if (function == "<module>") return 1;
  int line = DefLine(function);
  while (line > 1 && Stripped(line - 1).rfind('@', 0) == 0) --line;
  return line;
}

int PythonSource::LastLine(const std::string& function) const {
  if (function == "<module>") return static_cast<int>(lines_.size());
  int def = DefLine(function);
  if (def == 0) return -1;
  size_t indent = Indent(def);
  int last = def;
  for (int i = def + 1; i <= static_cast<int>(lines_.size()); ++i) {
    if (Stripped(i).empty()) continue;
    if (Indent(i) <= indent) break;
    last = i;
  }
  return last;
}

int PythonSource::StatementLine(const std::string& function, const std::string& statement) const {
  int begin = function == "<module>" ? 1 : DefLine(function) + 1;
  for (int i = begin; i <= LastLine(function) && i > 0; ++i)
    if (Stripped(i) == statement) return i;
  return 0;
}

std::string PythonSource::Stripped(size_t line) const {
  const std::string& s = lines_[line - 1];
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

size_t PythonSource::Indent(size_t line) const { return lines_[line - 1].find_first_not_of(" \t"); }

}  // namespace pyperf_test
