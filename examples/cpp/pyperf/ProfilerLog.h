// ProfilerLog: every line PyPerf prints on stderr, "PyPerf: ..." at a -v
// level, warnings and errors at any. Lines go through a NonBlockingLineWriter:
// logging never stalls sampling or delays a dump, and the lines it drops are
// counted (the next dump line says how many).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "nonblocking_line_writer.h"

namespace ebpf::pyperf {

class ProfilerLog {
 public:
  explicit ProfilerLog(int verbosity, int fd = STDERR_FILENO) : verbosity_(verbosity), out_(fd) {}

  int verbosity() const { return verbosity_; }
  // "PyPerf: <message>" if -v is at least `level`.
  void Log(int level, const std::string& message) {
    if (verbosity_ >= level) out_.WriteLine({"PyPerf: ", message});
  }
  // "PyPerf: warning: <message>" and "PyPerf: error: <message>", at any -v.
  void Warn(const std::string& message) { out_.WriteLine({"PyPerf: warning: ", message}); }
  void Error(const std::string& message) { out_.WriteLine({"PyPerf: error: ", message}); }
  // A line as it is; false if it was dropped.
  bool WriteLine(std::initializer_list<std::string_view> pieces) { return out_.WriteLine(pieces); }
  // Lines dropped since start.
  uint64_t dropped() const { return out_.dropped(); }

 private:
  int verbosity_;
  NonBlockingLineWriter out_;
};

}  // namespace ebpf::pyperf
