// ProfileEncoder: one output format of a dump (--format). ProfileOutput
// counts the interval's samples (Sample.h); at each dump it hands them to
// every encoder, which writes its whole file to a stream.
//
// Formats:
//   collapsed   "<stack> <count>" lines, gProfiler's format (the default)
//   flamegraph  one self-contained HTML page (FlameGraphEncoder.h)
//   speedscope  speedscope's JSON file format (SpeedscopeEncoder.h)
//   pprof       gzip'd profile.proto (PprofEncoder.h)
// MakeProfileEncoder (ProfileEncoders.h) makes the encoder of a format.
// Every encoder reads the samples' frames and spells them with a StackSpeller
// (FrameSpelling.h): the collapsed text for gProfiler, the display names for
// people.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "Sample.h"
#include "status.h"

namespace ebpf::pyperf {

enum class ProfileFormat { kCollapsed, kFlameGraph, kSpeedscope, kPprof };

// Every format, in the order of their table (and of --help).
std::vector<ProfileFormat> AllProfileFormats();
// "collapsed" -> kCollapsed, ...; nullopt for anything else.
std::optional<ProfileFormat> ParseProfileFormat(std::string_view name);
std::string_view ProfileFormatName(ProfileFormat format);
// What is appended to a dumped file's name after its time stamp: "" for
// collapsed (gProfiler's PATH.<stamp>), ".html", ".speedscope.json", ".pb.gz".
std::string_view ProfileFormatExtension(ProfileFormat format);

// One distinct sample of a dump and how many times it was taken.
struct StackCount {
  const Sample* sample = nullptr;
  uint64_t count = 0;
};

// One dump's samples, as every encoder sees them.
struct DumpedProfile {
  // The interval's distinct samples and their counts, in the order of their
  // collapsed lines (so every format lists threads and stacks alike). Samples
  // that differ only in native addresses spell one collapsed line, and are
  // next to each other.
  std::vector<StackCount> stacks;
  // The strings and mapped files the samples name.
  const FrameDictionary* dictionary = nullptr;
  std::chrono::system_clock::time_point start;  // the interval
  std::chrono::system_clock::time_point end;
  // CPU time one sample stands for: the perf event's period (1e9 / frequency
  // with -F).
  uint64_t sample_period_ns = 0;
};

class ProfileEncoder {
 public:
  virtual ~ProfileEncoder() = default;
  virtual ProfileFormat format() const = 0;
  // Writes the whole file for `profile` to `out`. False on a write error
  // (errno set); the caller checks ferror and fclose too.
  virtual bool Write(const DumpedProfile& profile, std::FILE* out) = 0;
};

}  // namespace ebpf::pyperf
