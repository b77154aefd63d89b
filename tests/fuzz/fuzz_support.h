// What the fuzz targets share: a reader that takes typed values off the front
// of a fuzz input (never failing: a short input reads as zeros), a check that
// aborts with a message (libFuzzer turns an abort into a finding, the
// standalone driver into a failed test), and the check every target runs on
// the output lines it makes: strict UTF-8 without NUL, and readable by
// gProfiler's parser (tests/cc/support/collapsed.h mirrors it; Python's
// str.splitlines(), which gProfiler splits the file with, is mirrored here).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace pyperf_fuzz {

// Aborts with `what` on stderr: a finding.
[[noreturn]] void Fail(const std::string& what);

#define PYPERF_FUZZ_CHECK(cond, what)                                     \
  do {                                                                    \
    if (!(cond)) ::pyperf_fuzz::Fail(std::string(#cond) + ": " + (what)); \
  } while (0)

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  size_t remaining() const { return size_ - pos_; }
  bool empty() const { return pos_ >= size_; }

  // `n` bytes (fewer at the end of the input).
  std::string_view Bytes(size_t n) {
    n = n < remaining() ? n : remaining();
    std::string_view out(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return out;
  }
  std::string_view Rest() { return Bytes(remaining()); }

  // Little-endian integers; missing bytes read as zero.
  template <typename T>
  T Take() {
    T value{};
    std::string_view b = Bytes(sizeof(T));
    if (!b.empty()) std::memcpy(&value, b.data(), b.size());
    return value;
  }
  uint8_t U8() { return Take<uint8_t>(); }
  uint16_t U16() { return Take<uint16_t>(); }
  uint32_t U32() { return Take<uint32_t>(); }
  uint64_t U64() { return Take<uint64_t>(); }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Where Python's str.splitlines() would break `text` other than at '\n':
// "\r", "\v", "\f", "\x1c", "\x1d", "\x1e", U+0085, U+2028, U+2029. gProfiler
// reads the collapsed file with splitlines(), so any of these inside a line
// cuts it in two. npos if there is none.
size_t FirstPythonLineBreakOtherThanNewline(std::string_view text);

// Aborts unless `text` (a whole dump or one stack line) is strict UTF-8
// without NUL and every line parses as gProfiler parses it: comm-pid/tid
// first token, frames with a known kind suffix, none empty, in PyPerf's order
// (truncation, sample error, Python, native, kernel), and a count.
void CheckProfileOutput(std::string_view text);

// True when PYPERF_FUZZ_VERBOSE is set: the targets then print what they
// made of each input (for looking at a seed or a crasher by hand).
bool Verbose();

// A scratch directory for the run (removed at exit): /dev/shm when there is
// one (no disk writes per input), else /tmp.
const std::string& ScratchDir();

}  // namespace pyperf_fuzz
