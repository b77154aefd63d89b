// Reading a speedscope file back: see speedscope_file.h.
#include "support/speedscope_file.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>

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

}  // namespace

bool SpeedscopeReaderAvailable() { return !NodeBinary().empty(); }

bool SpeedscopeAppAvailable() {
  return SpeedscopeReaderAvailable() && access("/usr/bin/chromium", X_OK) == 0 &&
         FileExists(std::string(PYPERF_JS_DIR) + "/node_modules/playwright-core/package.json");
}

SpeedscopeAppResult LoadInSpeedscopeApp(const std::string& path) {
  SpeedscopeAppResult result;
  std::string node = NodeBinary();
  if (node.empty()) {
    result.error = "node is not installed (scripts/setup.sh installs it)";
    return result;
  }
  std::string reader = std::string(PYPERF_JS_DIR) + "/speedscope_file.mjs";
  CommandResult run = RunCommand({node, reader, "--app", path}, std::chrono::seconds(120));
  const std::string kHeader = "speedscope_app 1\n";
  if (run.exit_code != 0 || run.out.compare(0, kHeader.size(), kHeader) != 0) {
    result.error = "`node " + reader + " --app " + path + "` exited " +
                   std::to_string(run.exit_code) + ": " + run.err.substr(0, 2000);
    return result;
  }
  for (const std::string& line : SplitLines(run.out.substr(kHeader.size()))) {
    size_t tab = line.find('\t');
    std::string kind = line.substr(0, tab);
    std::string rest = tab == std::string::npos ? "" : line.substr(tab + 1);
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
  std::string node = NodeBinary();
  if (node.empty()) {
    result.error = "node is not installed (scripts/setup.sh installs it)";
    return result;
  }
  std::string reader = std::string(PYPERF_JS_DIR) + "/speedscope_file.mjs";
  CommandResult run =
      RunCommand({node, reader, path, std::to_string(sample_period_ns)}, std::chrono::seconds(120));
  const std::string kHeader = "speedscope_file 1\n";
  if (run.exit_code != 0 || run.out.compare(0, kHeader.size(), kHeader) != 0) {
    result.error = "`node " + reader + " " + path + "` exited " + std::to_string(run.exit_code) +
                   ": " + run.err.substr(0, 2000);
    return result;
  }
  size_t start = kHeader.size();
  while (start < run.out.size()) {
    size_t end = run.out.find('\n', start);
    if (end == std::string::npos) end = run.out.size();
    std::string line = run.out.substr(start, end - start);
    start = end + 1;
    size_t tab = line.find('\t');
    std::string kind = line.substr(0, tab);
    std::string rest = tab == std::string::npos ? "" : line.substr(tab + 1);
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
