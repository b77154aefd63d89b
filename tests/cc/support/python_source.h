// A Python workload's source read as lines, and where its functions and
// statements are: the end-to-end tests derive the line numbers they expect
// from it, so editing a workload does not break them.
#pragma once

#include <string>
#include <vector>

namespace pyperf_test {

class PythonSource {
 public:
  // Reads `path`; empty() if it cannot be read.
  explicit PythonSource(const std::string& path);
  const std::string& path() const { return path_; }
  bool empty() const { return lines_.empty(); }

  // 1-based line of "def <function>(", 0 if there is none.
  int DefLine(const std::string& function) const;
  // co_firstlineno: the line of the function's first decorator, or of its
  // def; 1 for "<module>".
  int FirstLine(const std::string& function) const;
  // The last line of the function's body, indented deeper than its def (the
  // file's last for "<module>"); -1 if there is no such function.
  int LastLine(const std::string& function) const;
  // The line of `function`'s body that is exactly `statement`, 0 if none.
  int StatementLine(const std::string& function, const std::string& statement) const;

 private:
  // Line `line` (1-based) without its leading and trailing white space.
  std::string Stripped(size_t line) const;
  size_t Indent(size_t line) const;

  std::string path_;
  std::vector<std::string> lines_;
};

}  // namespace pyperf_test
