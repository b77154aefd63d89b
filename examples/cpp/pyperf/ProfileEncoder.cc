// ProfileEncoder: see ProfileEncoder.h. The format names and extensions.
#include "ProfileEncoder.h"



namespace ebpf::pyperf {
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

}  // namespace ebpf::pyperf
