#include "support/encoded_dump.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "FrameSpelling.h"
#include "ProfileEncoders.h"

namespace pyperf_test {
namespace {

std::unique_ptr<ebpf::pyperf::ProfileEncoder> EncoderOf(ebpf::pyperf::ProfileFormat format) {
  auto encoder = ebpf::pyperf::MakeProfileEncoder(format);
  EXPECT_EQ(encoder->format(), format);
  return encoder;
}

}  // namespace

SyntheticDump::SyntheticDump(DumpStacks stacks, uint64_t period_ns,
                             std::chrono::system_clock::time_point start,
                             std::chrono::nanoseconds length) {
  // In the order of their collapsed lines, as ProfileOutput hands them over.
  ebpf::pyperf::StackSpeller speller(dictionary_);
  std::vector<std::pair<std::string, ebpf::pyperf::StackCount>> ordered;
  for (const auto& [stack, count] : stacks) {
    samples_.push_back(Intern(stack, &dictionary_));
    ordered.emplace_back(std::string(), ebpf::pyperf::StackCount{&samples_.back(), count});
    speller.AppendCollapsedStack(samples_.back(), &ordered.back().first);
  }
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& entry : ordered) profile_.stacks.push_back(entry.second);
  profile_.dictionary = &dictionary_;
  profile_.start = start;
  profile_.end = start + std::chrono::duration_cast<std::chrono::system_clock::duration>(length);
  profile_.sample_period_ns = period_ns;
}

std::string EncodeDump(ebpf::pyperf::ProfileFormat format, const ebpf::pyperf::DumpedProfile& profile) {
  auto encoder = EncoderOf(format);
  char* buffer = nullptr;
  size_t size = 0;
  std::FILE* out = open_memstream(&buffer, &size);
  EXPECT_TRUE(encoder->Write(profile, out));
  std::fclose(out);
  std::string text(buffer, size);
  free(buffer);
  return text;
}

bool EncodeDumpToFile(ebpf::pyperf::ProfileFormat format, const ebpf::pyperf::DumpedProfile& profile,
                      const std::string& path) {
  auto encoder = EncoderOf(format);
  std::FILE* out = std::fopen(path.c_str(), "we");
  if (!out) {
    ADD_FAILURE() << "cannot open " << path << ": " << std::strerror(errno);
    return false;
  }
  const bool written = encoder->Write(profile, out);
  const bool stream_ok = !std::ferror(out);
  const bool closed = std::fclose(out) == 0;
  EXPECT_TRUE(written && stream_ok && closed)
      << path << ": written " << written << ", stream ok " << stream_ok << ", closed " << closed;
  return written && stream_ok && closed;
}

}  // namespace pyperf_test
