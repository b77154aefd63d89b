// Reading a speedscope file back as a consumer does: tests/js/speedscope_file.mjs
// validates it against speedscope's published schema (ajv) and turns it back
// into PyPerf's collapsed stacks; this runs it with node and parses its lines.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace pyperf_test {

struct SpeedscopeFileResult {
  // Why the file could not be read at all (node missing, reader failed, file
  // unreadable); "" if the reader ran.
  std::string error;
  // ajv's findings against speedscope's file-format-schema.json (or "not
  // JSON"); empty = valid.
  std::vector<std::string> schema_errors;
  // What speedscope's importer relies on beyond the schema (samples and
  // weights of one length, frame indices in shared.frames, endValue -
  // startValue = the weights' sum, weights exact multiples of the period,
  // strict UTF-8, at least one profile); empty = fine.
  std::vector<std::string> format_errors;
  // The file as stacks, "<profile name>;frame;..." -> weight / period, a
  // frame with file and line read as "<name> (<file>:<line>)_[p]", any other
  // as its name, names escaped as in the collapsed text: EscapedStack(stack,
  // PythonNaming::kDisplayName) (collapsed.h), or for a real run
  // SpeedscopeViewOfCollapsed.
  std::map<std::string, uint64_t> collapsed;
  uint64_t profiles = 0;
  std::vector<std::string> profile_names;  // in the file's order
};

// A collapsed dump (StackCounts, collapsed.h) as its speedscope file reads
// back: each Python frame named by its display name (DisplayViewOfFrame).
std::map<std::string, uint64_t> SpeedscopeViewOfCollapsed(
    const std::map<std::string, uint64_t>& stacks);

// Runs `node tests/js/speedscope_file.mjs path sample_period_ns` (node from
// $PATH, else /usr/bin/node).
SpeedscopeFileResult ReadSpeedscopeFile(const std::string& path, uint64_t sample_period_ns);

// The file opened in speedscope itself (its npm package's release build in
// Debian's chromium, through playwright-core), as `speedscope FILE` opens it.
struct SpeedscopeAppResult {
  std::string error;  // the loader could not run at all; "" if it ran
  // Page errors, console errors, alerts (speedscope alerts on an empty or
  // unrecognized file), failed requests, "Something went wrong"; empty = none.
  std::vector<std::string> problems;
  std::string title;    // document.title: "<the file's name> - speedscope"
  std::string profile;  // the toolbar's profile: "<name> (<index>/<count>)"
};
SpeedscopeAppResult LoadInSpeedscopeApp(const std::string& path);

// Whether node is there to run the reader (tests skip, or fail under
// PYPERF_TEST_STRICT=1, without it).
bool SpeedscopeReaderAvailable();
// Whether chromium is there for LoadInSpeedscopeApp.
bool SpeedscopeAppAvailable();

}  // namespace pyperf_test
