// ProfileEncoder: one output format of a dump (--format). ProfileOutput
// aggregates the interval's samples as stack texts (FrameSpelling.h); at each
// dump it hands them to every encoder, which writes its whole file to a stream.
//
// Formats:
//   collapsed   "<stack> <count>" lines, gProfiler's format (the default)
//   flamegraph  one self-contained HTML page (FlameGraphEncoder.h)
//   speedscope  speedscope's JSON file format (SpeedscopeEncoder.h)
//   pprof       gzip'd profile.proto (PprofEncoder.h)
// An encoder reads frames back with ParseStackText (FrameSpelling.h) and
// ParsePythonFrameText (PythonFrameFormat.h), never by its own parsing.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "status.h"

namespace pyperf {

enum class ProfileFormat { kCollapsed, kFlameGraph, kSpeedscope, kPprof };

// Every format, in the order of their table (and of --help).
std::vector<ProfileFormat> AllProfileFormats();
// "collapsed" -> kCollapsed, ...; nullopt for anything else.
std::optional<ProfileFormat> ParseProfileFormat(std::string_view name);
std::string_view ProfileFormatName(ProfileFormat format);
// What is appended to a dumped file's name after its time stamp: "" for
// collapsed (gProfiler's PATH.<stamp>), ".html", ".speedscope.json", ".pb.gz".
std::string_view ProfileFormatExtension(ProfileFormat format);

// Where a native frame's code lives, for formats that name the file (pprof's
// mappings). Filled only when an encoder asks for it (wants_native_origins).
struct NativeFrameOrigin {
  std::string path;          // the file as the process maps it ("" if unknown)
  std::string build_id;      // lowercase hex, "" if the file has none
  uint64_t elf_address = 0;  // the frame's address in the file's own terms
};

// One dump's samples, as every encoder sees them.
struct DumpedProfile {
  // The interval's distinct stacks (ProfileOutput's stack texts, without a
  // count) and their sample counts, sorted by stack text.
  std::vector<std::pair<std::string_view, uint64_t>> stacks;
  std::chrono::system_clock::time_point start;  // the interval
  std::chrono::system_clock::time_point end;
  // CPU time one sample stands for: the perf event's period (1e9 / frequency
  // with -F).
  uint64_t sample_period_ns = 0;
  // Native frame text (as in the stack, without its suffix) -> where it came
  // from; the first origin seen in the interval. Empty unless asked for.
  const std::unordered_map<std::string, NativeFrameOrigin>* native_origins = nullptr;
};

class ProfileEncoder {
 public:
  virtual ~ProfileEncoder() = default;
  virtual ProfileFormat format() const = 0;
  // Whether DumpedProfile::native_origins should be filled.
  virtual bool wants_native_origins() const { return false; }
  // Writes the whole file for `profile` to `out`. False on a write error
  // (errno set); the caller checks ferror and fclose too.
  virtual bool Write(const DumpedProfile& profile, std::FILE* out) = 0;
};

std::unique_ptr<ProfileEncoder> MakeProfileEncoder(ProfileFormat format);

}  // namespace pyperf
