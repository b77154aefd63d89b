// Synthetic dumps for the encoder tests: a DumpedProfile (ProfileEncoder.h)
// over stacks a test chose, and what an encoder writes for it, in memory or
// in a file, as ProfileOutput has it written.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ProfileEncoder.h"

namespace pyperf_test {

// (stack text, sample count), as ProfileOutput aggregates them.
using DumpStacks = std::vector<std::pair<std::string, uint64_t>>;

// 2025-12-03T13:53:20Z.
inline const std::chrono::system_clock::time_point kSyntheticDumpStart{
    std::chrono::seconds(1764770000)};

// A dump of `stacks` (sorted here, as ProfileOutput hands them over) over
// [start, start + length). It owns the stack texts its profile's views point
// into, so it is neither copied nor moved.
class SyntheticDump {
 public:
  SyntheticDump(
      DumpStacks stacks, uint64_t period_ns,
      std::chrono::system_clock::time_point start = kSyntheticDumpStart,
      std::chrono::nanoseconds length = std::chrono::seconds(60),
      const std::unordered_map<std::string, pyperf::NativeFrameOrigin>* origins = nullptr);
  SyntheticDump(const SyntheticDump&) = delete;
  SyntheticDump& operator=(const SyntheticDump&) = delete;

  const pyperf::DumpedProfile& profile() const { return profile_; }

 private:
  DumpStacks stacks_;
  pyperf::DumpedProfile profile_;
};

// What MakeProfileEncoder(format) writes for `profile`. A test failure if the
// encoder is not of `format` or reports a write error.
std::string EncodeDump(pyperf::ProfileFormat format, const pyperf::DumpedProfile& profile);

// Writes that file to `path`. False, and a test failure, if the file cannot
// be opened or written (the encoder's result, ferror, fclose); a test failure
// too if the encoder is not of `format`.
bool EncodeDumpToFile(pyperf::ProfileFormat format, const pyperf::DumpedProfile& profile,
                      const std::string& path);

}  // namespace pyperf_test
