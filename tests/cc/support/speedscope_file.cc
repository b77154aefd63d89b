// Reading a speedscope file back: see speedscope_file.h.
#include "support/speedscope_file.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <utility>

#include "support/collapsed.h"
#include "support/e2e.h"
#include "support/test_support.h"

namespace pyperf_test {
namespace {

std::string NodeBinary() {
  std::string node = FindInPath("node");
  if (node.empty() && access("/usr/bin/node", X_OK) == 0) node = "/usr/bin/node";
  return node;
}

bool ParseCount(const std::string& text, uint64_t* value) {
  if (text.empty() || text.size() > 19) return false;
  *value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    *value = *value * 10 + static_cast<uint64_t>(c - '0');
  }
  return true;
}

// Runs `node tests/js/speedscope_file.mjs args...` and checks its first line
// is `header`; gives the lines after it, or "" with *error set.
std::string RunReader(const std::vector<std::string>& args, const std::string& header,
                      std::string* error) {
  std::string node = NodeBinary();
  if (node.empty()) {
    *error = "node is not installed (scripts/setup.sh installs it)";
    return "";
  }
  std::vector<std::string> argv = {node, std::string(PYPERF_JS_DIR) + "/speedscope_file.mjs"};
  argv.insert(argv.end(), args.begin(), args.end());
  CommandResult run = RunCommand(argv, std::chrono::minutes(10));
  if (run.exit_code != 0 || run.out.compare(0, header.size(), header) != 0) {
    std::string command = "node";
    for (size_t i = 1; i < argv.size(); ++i) command += " " + argv[i];
    *error = "`" + command + "` exited " + std::to_string(run.exit_code) + ": " +
             run.err.substr(0, 2000);
    return "";
  }
  return run.out.substr(header.size());
}

// A reader's line "kind\trest" as {kind, rest}.
std::pair<std::string, std::string> KindAndRest(const std::string& line) {
  size_t tab = line.find('\t');
  return {line.substr(0, tab), tab == std::string::npos ? "" : line.substr(tab + 1)};
}

}  // namespace

std::map<std::string, uint64_t> SpeedscopeViewOfCollapsed(
    const std::map<std::string, uint64_t>& stacks) {
  std::map<std::string, uint64_t> view;
  for (const auto& [stack, count] : stacks) {
    std::optional<CollapsedLine> line = ParseCollapsedStack(stack);
    if (!line) {
      view[stack] += count;
      continue;
    }
    std::string viewed = stack.substr(0, stack.find(';'));
    for (const std::string& frame : line->frames) viewed += ";" + DisplayViewOfFrame(frame);
    view[viewed] += count;
  }
  return view;
}

bool SpeedscopeReaderAvailable() { return !NodeBinary().empty(); }

bool SpeedscopeAppAvailable() {
  return SpeedscopeReaderAvailable() && access("/usr/bin/chromium", X_OK) == 0 &&
         FileExists(std::string(PYPERF_JS_DIR) + "/node_modules/playwright-core/package.json");
}

SpeedscopeAppResult LoadInSpeedscopeApp(const std::string& path) {
  SpeedscopeAppResult result;
  std::string out = RunReader({"--app", path}, "speedscope_app 1\n", &result.error);
  if (!result.error.empty()) return result;
  for (const std::string& line : SplitLines(out)) {
    auto [kind, rest] = KindAndRest(line);
    if (kind == "problem") {
      result.problems.push_back(rest);
    } else if (kind == "title") {
      result.title = rest;
    } else if (kind == "profile") {
      result.profile = rest;
    } else {
      result.problems.push_back("unreadable line from the loader: " + line);
    }
  }
  return result;
}

SpeedscopeFileResult ReadSpeedscopeFile(const std::string& path, uint64_t sample_period_ns) {
  SpeedscopeFileResult result;
  std::string out =
      RunReader({path, std::to_string(sample_period_ns)}, "speedscope_file 1\n", &result.error);
  if (!result.error.empty()) return result;
  size_t start = 0;
  while (start < out.size()) {
    size_t end = out.find('\n', start);
    if (end == std::string::npos) end = out.size();
    std::string line = out.substr(start, end - start);
    start = end + 1;
    auto [kind, rest] = KindAndRest(line);
    if (kind == "schema") {
      result.schema_errors.push_back(rest);
    } else if (kind == "format") {
      result.format_errors.push_back(rest);
    } else if (kind == "profiles" && ParseCount(rest, &result.profiles)) {
    } else if (kind == "profile") {
      result.profile_names.push_back(rest);
    } else if (kind == "stack") {
      size_t count_end = rest.find('\t');
      uint64_t count = 0;
      if (count_end == std::string::npos || !ParseCount(rest.substr(0, count_end), &count)) {
        result.error = "unreadable line from the reader: " + line;
        return result;
      }
      result.collapsed[rest.substr(count_end + 1)] += count;
    } else {
      result.error = "unreadable line from the reader: " + line;
      return result;
    }
  }
  return result;
}

}  // namespace pyperf_test
