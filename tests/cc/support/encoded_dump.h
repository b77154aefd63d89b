// Synthetic dumps for the encoder tests: a DumpedProfile (ProfileEncoder.h)
// over stacks a test chose, and what an encoder writes for it, in memory or
// in a file, as ProfileOutput has it written.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <deque>
#include <utility>
#include <vector>

#include "ProfileEncoder.h"
#include "support/test_stack.h"

namespace pyperf_test {

// (stack, sample count), as ProfileOutput counts them.
using DumpStacks = std::vector<std::pair<TestStack, uint64_t>>;

// 2025-12-03T13:53:20Z.
inline const std::chrono::system_clock::time_point kSyntheticDumpStart{
    std::chrono::seconds(1764770000)};

// A dump of `stacks` (interned and put in the order ProfileOutput hands them
// over) over [start, start + length). It owns the dictionary and samples its
// profile points into, so it is neither copied nor moved.
class SyntheticDump {
 public:
  SyntheticDump(
      DumpStacks stacks, uint64_t period_ns,
      std::chrono::system_clock::time_point start = kSyntheticDumpStart,
      std::chrono::nanoseconds length = std::chrono::seconds(60));
  SyntheticDump(const SyntheticDump&) = delete;
  SyntheticDump& operator=(const SyntheticDump&) = delete;

  const ebpf::pyperf::DumpedProfile& profile() const { return profile_; }

 private:
  ebpf::pyperf::FrameDictionary dictionary_;
  std::deque<ebpf::pyperf::Sample> samples_;
  ebpf::pyperf::DumpedProfile profile_;
};

// What MakeProfileEncoder(format) writes for `profile`. A test failure if the
// encoder is not of `format` or reports a write error.
std::string EncodeDump(ebpf::pyperf::ProfileFormat format, const ebpf::pyperf::DumpedProfile& profile);

// Writes that file to `path`. False, and a test failure, if the file cannot
// be opened or written (the encoder's result, ferror, fclose); a test failure
// too if the encoder is not of `format`.
bool EncodeDumpToFile(ebpf::pyperf::ProfileFormat format, const ebpf::pyperf::DumpedProfile& profile,
                      const std::string& path);

}  // namespace pyperf_test
