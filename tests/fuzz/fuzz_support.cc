// Shared helpers of the fuzz targets; see fuzz_support.h.
#include "fuzz_support.h"

#include <ftw.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "support/collapsed.h"

namespace pyperf_fuzz {

void Fail(const std::string& what) {
  std::fprintf(stderr, "FUZZ CHECK FAILED: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

size_t FirstPythonLineBreakOtherThanNewline(std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const auto b = static_cast<unsigned char>(text[i]);
    switch (b) {
      case '\r':
      case '\v':
      case '\f':
      case 0x1c:
      case 0x1d:
      case 0x1e:
        return i;
      case 0xc2:  // U+0085 NEXT LINE
        if (i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) == 0x85) return i;
        break;
      case 0xe2:  // U+2028 LINE SEPARATOR, U+2029 PARAGRAPH SEPARATOR
        if (i + 2 < text.size() && static_cast<unsigned char>(text[i + 1]) == 0x80 &&
            (static_cast<unsigned char>(text[i + 2]) == 0xa8 ||
             static_cast<unsigned char>(text[i + 2]) == 0xa9))
          return i;
        break;
      default:
        break;
    }
  }
  return std::string_view::npos;
}

namespace {

std::string Excerpt(std::string_view text, size_t at) {
  size_t from = at > 80 ? at - 80 : 0;
  std::string out;
  for (char c : text.substr(from, 160)) {
    auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b < 0x7f) {
      out.push_back(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02x", b);
      out += hex;
    }
  }
  return out;
}

}  // namespace

void CheckProfileOutput(std::string_view text) {
  const std::string whole(text);
  if (auto bad = pyperf_test::FirstNonUtf8Byte(whole)) {
    Fail("output is not strict UTF-8 (or holds NUL) at byte " + std::to_string(*bad) + ": " +
         Excerpt(text, *bad));
  }
  size_t brk = FirstPythonLineBreakOtherThanNewline(text);
  if (brk != std::string_view::npos) {
    Fail("output holds a character Python's splitlines() breaks lines at (byte " +
         std::to_string(brk) + "): gProfiler would cut the line: " + Excerpt(text, brk));
  }
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string line(text.substr(start, end - start));
    start = end + 1;
    if (line.empty()) continue;
    std::string why;
    auto parsed = pyperf_test::ParseCollapsedLine(line, &why);
    if (!parsed) Fail("gProfiler cannot read the line (" + why + "): " + Excerpt(line, 0));
    for (const std::string& frame : parsed->frames) {
      if (pyperf_test::KindOf(frame) == pyperf_test::FrameKind::kUnknown)
        Fail("a frame without a kind suffix: " + Excerpt(frame, 0));
    }
    if (auto problem = pyperf_test::FrameOrderProblem(*parsed))
      Fail("frames out of order (" + *problem + "): " + Excerpt(line, 0));
  }
}

bool Verbose() {
  static const bool verbose = std::getenv("PYPERF_FUZZ_VERBOSE") != nullptr;
  return verbose;
}

namespace {

int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }

struct Scratch {
  std::string dir;
  Scratch() {
    const char* base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    std::string tmpl = std::string(base) + "/pyperf-fuzz-XXXXXX";
    if (!mkdtemp(tmpl.data())) Fail("cannot create a scratch directory under " + std::string(base));
    dir = tmpl;
  }
  ~Scratch() { nftw(dir.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS); }
};

}  // namespace

const std::string& ScratchDir() {
  static Scratch scratch;
  return scratch.dir;
}

}  // namespace pyperf_fuzz
