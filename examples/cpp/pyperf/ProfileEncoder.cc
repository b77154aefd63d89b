// ProfileEncoder: see ProfileEncoder.h. The format names and extensions, the
// collapsed encoder and the factory.
#include "ProfileEncoder.h"

#include <algorithm>
#include <cinttypes>
#include <string>

#include "FlameGraphEncoder.h"
#include "PprofEncoder.h"
#include "SpeedscopeEncoder.h"

namespace pyperf {
namespace {

struct FormatInfo {
  ProfileFormat format;
  std::string_view name;
  std::string_view extension;
};

constexpr FormatInfo kFormats[] = {
    {ProfileFormat::kCollapsed, "collapsed", ""},
    {ProfileFormat::kFlameGraph, "flamegraph", ".html"},
    {ProfileFormat::kSpeedscope, "speedscope", ".speedscope.json"},
    {ProfileFormat::kPprof, "pprof", ".pb.gz"},
};

const FormatInfo& Info(ProfileFormat format) {
  for (const FormatInfo& info : kFormats) {
    if (info.format == format) return info;
  }
  return kFormats[0];
}

// "<stack> <count>" per line: what gProfiler reads.
class CollapsedEncoder final : public ProfileEncoder {
 public:
  ProfileFormat format() const override { return ProfileFormat::kCollapsed; }
  bool Write(const DumpedProfile& profile, std::FILE* out) override {
    std::string sanitized;
    for (auto [stack, count] : profile.stacks) {
      // A line break inside a stack would split the line and corrupt the
      // protocol (FrameSpelling escapes them; this guards other callers).
      if (stack.find_first_of("\r\n") != std::string_view::npos) {
        sanitized.assign(stack);
        std::replace_if(
            sanitized.begin(), sanitized.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
        stack = sanitized;
      }
      if (std::fwrite(stack.data(), 1, stack.size(), out) != stack.size()) return false;
      if (std::fprintf(out, " %" PRIu64 "\n", count) < 0) return false;
    }
    return true;
  }
};

}  // namespace

std::vector<ProfileFormat> AllProfileFormats() {
  std::vector<ProfileFormat> formats;
  for (const FormatInfo& info : kFormats) formats.push_back(info.format);
  return formats;
}

std::optional<ProfileFormat> ParseProfileFormat(std::string_view name) {
  for (const FormatInfo& info : kFormats) {
    if (info.name == name) return info.format;
  }
  return std::nullopt;
}

std::string_view ProfileFormatName(ProfileFormat format) { return Info(format).name; }

std::string_view ProfileFormatExtension(ProfileFormat format) { return Info(format).extension; }

std::unique_ptr<ProfileEncoder> MakeProfileEncoder(ProfileFormat format) {
  switch (format) {
    case ProfileFormat::kCollapsed:
      break;
    case ProfileFormat::kFlameGraph:
      return MakeFlameGraphEncoder();
    case ProfileFormat::kSpeedscope:
      return MakeSpeedscopeEncoder();
    case ProfileFormat::kPprof:
      return MakePprofEncoder();
  }
  return std::make_unique<CollapsedEncoder>();
}

}  // namespace pyperf
