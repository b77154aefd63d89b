#include "support/encoded_dump.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace pyperf_test {
namespace {

std::unique_ptr<pyperf::ProfileEncoder> EncoderOf(pyperf::ProfileFormat format) {
  auto encoder = pyperf::MakeProfileEncoder(format);
  EXPECT_EQ(encoder->format(), format);
  return encoder;
}

}  // namespace

SyntheticDump::SyntheticDump(
    DumpStacks stacks, uint64_t period_ns, std::chrono::system_clock::time_point start,
    std::chrono::nanoseconds length,
    const std::unordered_map<std::string, pyperf::NativeFrameOrigin>* origins)
    : stacks_(std::move(stacks)) {
  std::sort(stacks_.begin(), stacks_.end());
  for (const auto& [stack, count] : stacks_) profile_.stacks.emplace_back(stack, count);
  profile_.start = start;
  profile_.end = start + std::chrono::duration_cast<std::chrono::system_clock::duration>(length);
  profile_.sample_period_ns = period_ns;
  profile_.native_origins = origins;
}

std::string EncodeDump(pyperf::ProfileFormat format, const pyperf::DumpedProfile& profile) {
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

bool EncodeDumpToFile(pyperf::ProfileFormat format, const pyperf::DumpedProfile& profile,
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
