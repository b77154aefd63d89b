// NonBlockingLineWriter: writes whole lines to a file descriptor (typically
// stderr) without ever blocking the caller. A program whose log goes to a pipe
// that its reader drains only now and then (gProfiler reads PyPerf's stderr at
// each snapshot) must not stall in write(2) when the pipe is full: a line that
// cannot be written at once is dropped and counted instead.
//
// Each line is one write(2) of at most PIPE_BUF bytes, made only when poll(2)
// reports the descriptor writable. A pipe that reports POLLOUT has a free
// buffer slot, so such a write completes at once and is never interleaved
// with other writers' output. Longer lines are cut to fit, ending with
// kCutMarker. The descriptor's flags are never changed: stderr's open file
// description may be shared with a terminal or with the parent process, which
// O_NONBLOCK would change too.
#pragma once

#include <limits.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string_view>

namespace ebpf {

class NonBlockingLineWriter {
 public:
  // Ends a line that was cut to fit into one write of PIPE_BUF bytes.
  static constexpr std::string_view kCutMarker = " [line cut]";
  // The longest write, newline included.
  static constexpr size_t kMaxWrite = PIPE_BUF;

  // Writes to `fd`, which stays the caller's (never closed, flags untouched).
  explicit NonBlockingLineWriter(int fd) : fd_(fd) {}
  NonBlockingLineWriter(const NonBlockingLineWriter&) = delete;
  NonBlockingLineWriter& operator=(const NonBlockingLineWriter&) = delete;

  // Writes `line` and a newline if the descriptor can take them now; returns
  // true if the line was written, false if it was dropped (not writable now,
  // EAGAIN, EPIPE, any other error, or a short write). A reader that has gone
  // away never raises SIGPIPE, whatever the process does with that signal.
  bool WriteLine(std::string_view line) { return WriteLine({line}); }
  // The same for the concatenation of `pieces`, without building a string.
  bool WriteLine(std::initializer_list<std::string_view> pieces);

  // Lines dropped, and lines cut (and written), since construction.
  uint64_t dropped() const { return dropped_; }
  uint64_t cut() const { return cut_; }

 private:
  bool Write(size_t size);

  int fd_;
  uint64_t dropped_ = 0;
  uint64_t cut_ = 0;
  // A short write left a partial line: the next line starts on a new one.
  bool mid_line_ = false;
  char buffer_[kMaxWrite];
};

}  // namespace ebpf
