// Reading pprof files back with go tool pprof: see pprof_file.h.
#include "support/pprof_file.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <sstream>

#include "FrameSpelling.h"
#include "PprofEncoder.h"
#include "PythonFrameFormat.h"
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
  pyperf::AppendSanitizedUtf8(text, &out);
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

}  // namespace

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

std::string PprofViewOfCollapsedStack(std::string_view collapsed_stack) {
  pyperf::StackHead head;
  std::vector<pyperf::SpelledFrame> frames;
  if (!pyperf::ParseStackText(collapsed_stack, &head, &frames)) {
    return std::string(pyperf::kUnparseableStack);
  }
  std::string view =
      Sanitized(head.comm) + "-" + std::to_string(head.pid) + "/" + std::to_string(head.tid);
  if (frames.empty()) frames.push_back({pyperf::FrameKind::kMarker, pyperf::kNoFrames});
  for (const pyperf::SpelledFrame& frame : frames) {
    std::string_view name = frame.text;
    pyperf::PythonFrameParts parts;
    if (frame.kind == pyperf::FrameKind::kPython &&
        pyperf::ParsePythonFrameText(frame.text, &parts)) {
      name = parts.name;
    }
    if (name.empty()) name = pyperf::kPprofUnnamedFrame;
    view += ';';
    view += Sanitized(name);
  }
  return view;
}

}  // namespace pyperf_test
