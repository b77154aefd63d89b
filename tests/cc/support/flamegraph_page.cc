// flamegraph_page: see flamegraph_page.h.
#include "support/flamegraph_page.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "FrameSpelling.h"
#include "support/collapsed.h"
#include "support/e2e.h"
#include "support/test_support.h"

namespace pyperf_test {
namespace {

constexpr char kChromium[] = "/usr/bin/chromium";

// The collapsed suffix of a frame kind as the page names it ("" for the
// process, thread and root boxes).
std::string FrameKindSuffix(const std::string& kind) {
  using namespace ebpf::pyperf;
  if (kind == "python") return std::string(kPythonSuffix);
  if (kind == "native") return std::string(kNativeSuffix);
  if (kind == "kernel") return std::string(kKernelSuffix);
  if (kind == "marker") return std::string(kMarkerSuffix);
  if (kind == "task") return std::string(kTaskSuffix);
  return "";
}

std::string ScriptPath() { return std::string(PYPERF_JS_DIR) + "/flamegraph_page.mjs"; }

std::string Hex(const std::string& text) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : text) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 0xf]);
  }
  return out;
}

std::optional<std::string> Unhex(const std::string& hex) {
  if (hex.size() % 2) return std::nullopt;
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    int value = 0;
    for (size_t k = i; k < i + 2; ++k) {
      char c = hex[k];
      int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (digit < 0) return std::nullopt;
      value = value * 16 + digit;
    }
    out.push_back(static_cast<char>(value));
  }
  return out;
}

}  // namespace

std::optional<std::string> FlameGraphConsumerUnavailable() {
  if (FindInPath("node").empty()) return "node is not installed (scripts/setup.sh installs it)";
  if (access(kChromium, X_OK) != 0)
    return std::string(kChromium) + " is not installed (scripts/setup.sh installs it)";
  if (!FileExists(std::string(PYPERF_JS_DIR) + "/node_modules/playwright-core/package.json"))
    return "playwright-core is not in " + std::string(PYPERF_JS_DIR) +
           "/node_modules (run npm ci there)";
  return std::nullopt;
}

FlameGraphPageResult CheckFlameGraphPage(const std::string& html_path,
                                         const std::vector<std::string>& node_path,
                                         const std::string& search,
                                         const std::string& screenshot_png) {
  FlameGraphPageResult result;
  if (auto why = FlameGraphConsumerUnavailable()) {
    result.error = *why;
    return result;
  }
  TempDir dir;
  const std::string request_path = dir.File("request");
  {
    std::ofstream request(request_path);
    request << "html=" << Hex(html_path) << "\n";
    for (const auto& label : node_path) request << "path=" << Hex(label) << "\n";
    request << "search=" << Hex(search) << "\n";
    request << "screenshot=" << Hex(screenshot_png) << "\n";
    if (!request) {
      result.error = "cannot write " + request_path;
      return result;
    }
  }
  ChildProcess::Options options;
  options.cwd = PYPERF_JS_DIR;  // where node resolves playwright-core from
  CommandResult run = RunCommand({FindInPath("node"), ScriptPath(), request_path},
                                 std::chrono::minutes(10), options);
  if (run.exit_code != 0) {
    result.error = "node " + ScriptPath() + " exited " + std::to_string(run.exit_code) + ": " +
                   run.err + run.out;
    return result;
  }
  bool saw_found = false;
  for (const std::string& line : SplitLines(run.out)) {
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    auto text = [&](const std::string& hex) {
      auto decoded = Unhex(hex);
      if (!decoded) result.error = "unreadable output line: " + line;
      return decoded.value_or("");
    };
    if (key == "error") {
      result.error = text(value);
    } else if (key == "console") {
      result.console_errors.push_back(text(value));
    } else if (key == "found") {
      saw_found = true;
      result.found = value == "1";
    } else if (key == "samples") {
      result.samples = std::strtoull(value.c_str(), nullptr, 10);
    } else if (key == "percent") {
      result.percent = std::strtod(value.c_str(), nullptr);
    } else if (key == "label") {
      result.label = text(value);
    } else if (key == "tooltip") {
      result.tooltip = text(value);
    } else if (key == "zoomed") {
      result.zoomed = value == "1";
    } else if (key == "search_matches") {
      result.search_matches = std::strtoull(value.c_str(), nullptr, 10);
    } else if (key == "collapsed") {
      size_t space = value.rfind(' ');
      if (space == std::string::npos) {
        result.error = "unreadable output line: " + line;
        continue;
      }
      result.collapsed[text(value.substr(0, space))] +=
          std::strtoull(value.c_str() + space + 1, nullptr, 10);
    } else if (key == "kind") {
      result.kinds.insert(text(value));
    } else if (key == "legend") {
      const std::string entry = text(value);
      const size_t tab = entry.find('\t');
      result.legend[entry.substr(0, tab)] = tab == std::string::npos ? "" : entry.substr(tab + 1);
    }
  }
  for (const std::string& kind : result.kinds) {
    if (kind == "root") continue;
    auto key = result.legend.find(kind);
    const std::string suffix = FrameKindSuffix(kind);
    if (key == result.legend.end() || key->second.empty()) {
      result.legend_missing += "the legend has no key for " + kind + " boxes\n";
    } else if (!suffix.empty() && key->second.find(suffix) == std::string::npos) {
      result.legend_missing +=
          "the legend's key for " + kind + " (" + key->second + ") does not show " + suffix + "\n";
    }
  }
  if (result.error.empty() && !saw_found)
    result.error = "the page check printed no result: " + run.err + run.out;
  return result;
}

std::vector<std::string> FlameGraphNodePath(const std::string& stack, size_t depth) {
  std::optional<CollapsedLine> line = ParseCollapsedStack(stack);
  if (!line) return {};
  std::vector<std::string> path = {line->comm + "-" + std::to_string(line->pid),
                                   std::to_string(line->tid)};
  for (size_t i = 0; i < depth && i < line->frames.size(); ++i) path.push_back(line->frames[i]);
  return path;
}

std::vector<std::string> FlameGraphNodePath(const TestStack& stack, size_t depth) {
  const std::string thread = Collapsed(TestStack(stack.comm, stack.pid, stack.tid));
  const size_t slash = thread.rfind('/');
  std::vector<std::string> path = {thread.substr(0, slash), thread.substr(slash + 1)};
  for (size_t i = 0; i < depth && i < stack.frames.size(); ++i)
    path.push_back(EscapedFrame(stack.frames[i], PythonNaming::kFullName));
  return path;
}

}  // namespace pyperf_test
