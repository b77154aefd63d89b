// Reading pprof files back with go tool pprof: see pprof_file.h.
#include "support/pprof_file.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <system_error>

#include "FrameSpelling.h"
#include "PprofEncoder.h"
#include "support/e2e.h"
#include "support/test_support.h"
#include "utf8.h"

namespace pyperf_test {
namespace {

// -traces' lines: a separator between samples, "%10s:  %s" per label (string
// labels, then numeric ones, each sorted), then "%10s   %s" per frame, leaf
// first, the sample's value on the first.
constexpr std::string_view kTracesSeparator =
    "-----------+-------------------------------------------------------";

std::string Sanitized(std::string_view text) {
  std::string out;
  ebpf::AppendSanitizedUtf8(text, &out);
  return out;
}

// One -traces sample being read.
struct TraceSample {
  std::map<std::string, std::vector<std::string>> labels;
  std::vector<std::string> frames;  // leaf first
  uint64_t value = 0;
  std::string text;
};

void FinishTraceSample(TraceSample* sample, PprofReadback* out) {
  if (sample->frames.empty() && sample->labels.empty()) return;
  std::string key;
  const auto comm = sample->labels.find("comm");
  const auto pid = sample->labels.find("pid");
  const auto tid = sample->labels.find("tid");
  // pprof drops a label whose string is empty: no comm is an empty comm.
  const bool has_comm = comm != sample->labels.end();
  const bool labeled = pid != sample->labels.end() && tid != sample->labels.end() &&
                       (!has_comm || comm->second.size() == 1) && pid->second.size() == 1 &&
                       tid->second.size() == 1 && sample->labels.size() == (has_comm ? 3 : 2);
  if (labeled) {
    key = (has_comm ? comm->second[0] : "") + "-" + pid->second[0] + "/" + tid->second[0];
  } else if (!sample->labels.empty()) {
    out->unlabeled_samples.push_back(sample->text);
  }
  for (auto it = sample->frames.rbegin(); it != sample->frames.rend(); ++it) {
    if (!key.empty() || it != sample->frames.rbegin()) key += ';';
    key += *it;
  }
  out->stacks[key] += sample->value;
  *sample = TraceSample{};
}

void ParseTraces(const std::string& traces, PprofReadback* out) {
  // Split on '\n' only: names may hold any other character.
  std::vector<std::string_view> lines;
  std::string_view rest = traces;
  while (!rest.empty()) {
    size_t end = rest.find('\n');
    lines.push_back(rest.substr(0, end));
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end + 1);
  }
  bool in_samples = false;
  TraceSample sample;
  for (std::string_view line : lines) {
    if (line == kTracesSeparator) {
      if (in_samples) FinishTraceSample(&sample, out);
      in_samples = true;
      continue;
    }
    if (!in_samples) continue;  // the header: file, type, time, ...
    sample.text.append(line).append("\n");
    if (line.size() >= 11 && line[10] == ':' && sample.frames.empty()) {
      // "%10s:  %s": a label (our keys are shorter than 10), values
      // space-separated; a comm may hold spaces, so a string label's value
      // is the whole rest (comm is our only string label).
      std::string key(line.substr(0, 10));
      key.erase(0, key.find_first_not_of(' '));
      std::string_view values = line.size() >= 13 ? line.substr(13) : std::string_view();
      if (key == "comm") {
        sample.labels[key].emplace_back(values);
      } else {
        std::istringstream in{std::string(values)};
        std::string value;
        while (in >> value) sample.labels[key].push_back(value);
      }
      continue;
    }
    if (line.size() >= 13 && line.substr(10, 3) == "   ") {
      std::string_view value = line.substr(0, 10);
      value.remove_prefix(std::min(value.find_first_not_of(' '), value.size()));
      if (!value.empty()) {
        if (!sample.frames.empty()) {
          out->unreadable_lines.emplace_back(line);
          continue;
        }
        sample.value = std::strtoull(std::string(value).c_str(), nullptr, 10);
      }
      sample.frames.emplace_back(line.substr(13));
      continue;
    }
    if (!line.empty()) out->unreadable_lines.emplace_back(line);
  }
  FinishTraceSample(&sample, out);
}

// -raw: "Samples:", the sample types, then per sample " %10d %10d: ids"
// followed by label lines; "Locations"; "Mappings", then per mapping
// "%d: %#x/%#x/%#x %s %s %s" (id, start/limit/offset, file, build-id, bits).
void ParseRaw(const std::string& raw, PprofReadback* out) {
  enum { kHeader, kSampleTypes, kSamples, kLocations, kMappings } section = kHeader;
  std::string_view rest = raw;
  while (!rest.empty()) {
    size_t end = rest.find('\n');
    std::string_view line = rest.substr(0, end);
    rest.remove_prefix(end == std::string_view::npos ? rest.size() : end + 1);
    if (line == "Samples:") {
      section = kSampleTypes;
      continue;
    }
    if (line == "Locations") {
      section = kLocations;
      continue;
    }
    if (line == "Mappings") {
      section = kMappings;
      continue;
    }
    if (section == kSampleTypes) {
      section = kSamples;
      continue;
    }
    if (section == kSamples) {
      std::string_view trimmed = line.substr(std::min(line.find_first_not_of(' '), line.size()));
      if (trimmed.empty() || !std::isdigit(static_cast<unsigned char>(trimmed[0]))) continue;
      const size_t colon = trimmed.find(':');
      std::istringstream in{std::string(trimmed.substr(0, colon))};
      uint64_t count = 0;
      int64_t cpu = 0;
      in >> count >> cpu;
      out->total_samples += count;
      out->total_cpu_ns += cpu;
    } else if (section == kMappings && !line.empty()) {
      // The file may hold spaces; the build-id and the bits cannot.
      PprofRawMapping mapping;
      const size_t colon = line.find(": ");
      const size_t addresses_end = line.find(' ', colon + 2);
      const size_t bits_space = line.rfind(' ');
      const size_t build_id_space = line.rfind(' ', bits_space - 1);
      if (colon == std::string_view::npos || addresses_end == std::string_view::npos ||
          build_id_space == std::string_view::npos || build_id_space <= addresses_end) {
        out->unreadable_lines.emplace_back(line);
        continue;
      }
      mapping.id = std::strtoull(std::string(line.substr(0, colon)).c_str(), nullptr, 10);
      mapping.file = line.substr(addresses_end + 1, build_id_space - addresses_end - 1);
      mapping.build_id = line.substr(build_id_space + 1, bits_space - build_id_space - 1);
      mapping.has_functions = line.substr(bits_space + 1).find("[FN]") != std::string_view::npos;
      out->mappings.push_back(std::move(mapping));
    }
  }
}

// `text`, all of it a decimal number.
template <typename Number>
bool ParseNumber(std::string_view text, Number* out) {
  const char* end = text.data() + text.size();
  auto [stop, error] = std::from_chars(text.data(), end, *out);
  return error == std::errc() && stop == end && !text.empty();
}

// A Python frame's collapsed text, "module.Class.function (file:line)": the
// file is the one whose module (as StackSpeller spells it) starts the name.
// A file may hold " (" itself, so each one is tried.
bool ReadPythonFrame(std::string_view text, TestStack* stack) {
  if (text.empty() || text.back() != ')') return false;
  ebpf::pyperf::FrameDictionary dictionary;
  ebpf::pyperf::StackSpeller speller(dictionary);
  for (size_t open = text.find(" ("); open != std::string_view::npos;
       open = text.find(" (", open + 1)) {
    const std::string_view place = text.substr(open + 2, text.size() - open - 3);
    const size_t colon = place.rfind(':');
    if (colon == std::string_view::npos) continue;
    int line = 0;
    if (!ParseNumber(place.substr(colon + 1), &line)) continue;
    ebpf::pyperf::SampleFrame module;  // a frame without a name: "module."
    module.kind = ebpf::pyperf::FrameKind::kPython;
    module.file = dictionary.Intern(place.substr(0, colon));
    const std::string_view prefix = speller.FullName(module);
    const std::string_view name = text.substr(0, open);
    if (name.substr(0, prefix.size()) != prefix) continue;
    stack->Python(std::string(name.substr(prefix.size())), std::string(place.substr(0, colon)),
                  line);
    return true;
  }
  return false;
}

// A collapsed stack, "comm-pid/tid;frame_[p];frame_[pn];...", as the frames
// PyPerf spelled it from.
std::optional<TestStack> ReadCollapsedStack(std::string_view text) {
  const std::string_view head = text.substr(0, text.find(ebpf::pyperf::kFrameSeparator));
  const size_t slash = head.rfind('/');
  const size_t dash = head.rfind('-', slash);
  uint32_t pid = 0, tid = 0;
  if (slash == std::string_view::npos || dash == std::string_view::npos ||
      !ParseNumber(head.substr(dash + 1, slash - dash - 1), &pid) ||
      !ParseNumber(head.substr(slash + 1), &tid)) {
    return std::nullopt;
  }
  TestStack stack(std::string(head.substr(0, dash)), pid, tid);
  std::string_view rest = text.substr(head.size());
  while (!rest.empty()) {
    rest.remove_prefix(1);  // the separator
    const std::string_view frame = rest.substr(0, rest.find(ebpf::pyperf::kFrameSeparator));
    rest.remove_prefix(frame.size());
    std::optional<ebpf::pyperf::FrameKind> kind;
    for (ebpf::pyperf::FrameKind k :
         {ebpf::pyperf::FrameKind::kPython, ebpf::pyperf::FrameKind::kNative,
          ebpf::pyperf::FrameKind::kKernel, ebpf::pyperf::FrameKind::kMarker,
          ebpf::pyperf::FrameKind::kTask}) {
      const std::string_view suffix = ebpf::pyperf::FrameSuffix(k);
      if (frame.size() >= suffix.size() && frame.substr(frame.size() - suffix.size()) == suffix) {
        kind = k;
      }
    }
    if (!kind) return std::nullopt;
    const std::string_view spelled = frame.substr(0, frame.rfind("_["));
    switch (*kind) {
      case ebpf::pyperf::FrameKind::kPython:
        if (!ReadPythonFrame(spelled, &stack)) return std::nullopt;
        break;
      case ebpf::pyperf::FrameKind::kNative:
        stack.Native(std::string(spelled));
        break;
      case ebpf::pyperf::FrameKind::kKernel:
        stack.Kernel(std::string(spelled));
        break;
      case ebpf::pyperf::FrameKind::kMarker:
        stack.Marker(std::string(spelled));
        break;
      case ebpf::pyperf::FrameKind::kTask: {  // "name (coroutine)"
        const size_t open = spelled.rfind(" (");
        if (open == std::string_view::npos || spelled.back() != ')') return std::nullopt;
        stack.Task(std::string(spelled.substr(0, open)),
                   std::string(spelled.substr(open + 2, spelled.size() - open - 3)));
        break;
      }
    }
  }
  return stack;
}

std::string Gunzip(const std::string& gz) {
  z_stream stream{};
  EXPECT_EQ(inflateInit2(&stream, 15 + 16), Z_OK);  // gzip only: the file must be gzip'd
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  stream.avail_in = static_cast<uInt>(gz.size());
  std::string out;
  char buffer[65536];
  int status = Z_OK;
  while (status == Z_OK) {
    stream.next_out = reinterpret_cast<Bytef*>(buffer);
    stream.avail_out = sizeof(buffer);
    status = inflate(&stream, Z_NO_FLUSH);
    out.append(buffer, sizeof(buffer) - stream.avail_out);
  }
  EXPECT_EQ(status, Z_STREAM_END) << "not a complete gzip stream";
  EXPECT_EQ(stream.avail_in, 0u) << "bytes after the gzip stream";
  inflateEnd(&stream);
  return out;
}

}  // namespace

perftools::profiles::Profile DecodePprofFile(const std::string& path) {
  perftools::profiles::Profile profile;
  EXPECT_TRUE(profile.ParseFromString(Gunzip(ReadFile(path)))) << path;
  return profile;
}

PprofReadback ReadPprofWithGoTool(const std::string& path,
                                  const std::vector<std::string>& extra_args) {
  PprofReadback result;
  const std::string go = FindInPath("go");
  if (go.empty()) {
    result.error = "go is not installed (golang-go; scripts/setup.sh installs it)";
    return result;
  }
  TempDir home;
  ChildProcess::Options options;
  options.env = {{"HOME", home.path()},
                 {"GOCACHE", home.File("gocache")},
                 {"GOPATH", home.File("gopath")},
                 {"GOFLAGS", ""},
                 {"GOTOOLCHAIN", "local"},
                 {"GOPROXY", "off"},
                 {"GOTELEMETRY", "off"},
                 {"PPROF_TMPDIR", home.File("pprof")},
                 {"PPROF_BINARY_PATH", home.File("binaries")}};
  auto run = [&](const std::string& report, std::string* out) {
    std::vector<std::string> argv = {
        go, "tool", "pprof", "-symbolize=none", "-sample_index=samples", "-" + report};
    argv.insert(argv.end(), extra_args.begin(), extra_args.end());
    argv.push_back(path);
    CommandResult command = RunCommand(argv, std::chrono::minutes(10), options);
    if (command.exit_code != 0) {
      result.error += "go tool pprof -" + report + " " + path + " exited with " +
                      std::to_string(command.exit_code) + ": " + command.err + "\n";
      return false;
    }
    *out = std::move(command.out);
    return true;
  };
  if (!run("top", &result.top) || !run("traces", &result.traces) || !run("raw", &result.raw)) {
    return result;
  }
  ParseTraces(result.traces, &result);
  ParseRaw(result.raw, &result);
  return result;
}

std::string PprofViewOfStack(const TestStack& stack) {
  ebpf::pyperf::FrameDictionary dictionary;
  const ebpf::pyperf::Sample sample = Intern(stack, &dictionary);
  ebpf::pyperf::StackSpeller speller(dictionary);
  std::string view = Sanitized(speller.Text(sample.comm)) + "-" + std::to_string(sample.pid) + "/" +
                     std::to_string(sample.tid);
  if (sample.frames.empty()) view += ";" + std::string(ebpf::pyperf::kNoFrames);
  for (const ebpf::pyperf::SampleFrame& frame : sample.frames) {
    const std::string_view name = speller.DisplayName(frame);
    view += ';';
    view += Sanitized(name.empty() ? ebpf::pyperf::kPprofUnnamedFrame : name);
  }
  return view;
}

std::string PprofViewOfCollapsedStack(std::string_view collapsed_stack) {
  std::optional<TestStack> stack = ReadCollapsedStack(collapsed_stack);
  if (!stack) return "<not a collapsed stack: " + std::string(collapsed_stack) + ">";
  return PprofViewOfStack(*stack);
}

}  // namespace pyperf_test
