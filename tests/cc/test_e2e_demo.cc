// The README's profile command, scripts/profile-demo.sh, run as a newcomer
// runs it (for 4 s instead of 10): it exits 0, prints the hottest stacks of
// the demo workload and the path of the flame graph page of the same run, and
// that page works in headless chromium: it holds the run's collapsed samples,
// the demo's RequestHandler.handle box reads "demo_workload.RequestHandler.
// handle" with the full name, file and line in its tooltip, shows its share
// and zooms, and the busiest thread's function is found by a search. Its
// screenshot (build/flamegraph-demo.png) is the README's (docs/flamegraph.png).
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "support/collapsed.h"
#include "support/flamegraph_page.h"
#include "support/test_support.h"

namespace pyperf_test {
namespace {

constexpr char kFlameGraphLine[] = "demo: flame graph (open it in a browser; it works offline): ";
constexpr char kCollapsedLine[] = "demo: collapsed stacks written to ";

std::string AfterPrefix(const std::string& text, const std::string& prefix) {
  for (const auto& line : SplitLines(text))
    if (line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
  return "";
}

TEST(Demo, TheProfileCommandWritesAFlameGraphThatWorksInChromium) {
  PYPERF_REQUIRE_BPF();
  if (auto why = FlameGraphConsumerUnavailable()) PYPERF_SKIP_OR_FAIL(*why);
  ChildProcess::Options options;
  options.env["PYPERF_BUILD_DIR"] = PYPERF_BUILD_DIR;
  CommandResult demo =
      RunCommand({"bash", std::string(PYPERF_SOURCE_DIR) + "/scripts/profile-demo.sh", "4"},
                 std::chrono::minutes(5), options);
  ASSERT_EQ(demo.exit_code, 0) << demo.out << demo.err;
  const std::string collapsed_file = AfterPrefix(demo.out, kCollapsedLine);
  const std::string page_file = AfterPrefix(demo.out, kFlameGraphLine);
  ASSERT_FALSE(collapsed_file.empty()) << demo.out;
  EXPECT_EQ(page_file, collapsed_file + ".html") << demo.out;
  // The demo's output directory is the user's to keep; the test removes it.
  struct RemoveDir {
    std::string dir;
    ~RemoveDir() {
      if (dir.rfind("/tmp/pyperf-demo-", 0) == 0) RunCommand({"rm", "-rf", dir});
    }
  } cleanup{collapsed_file.substr(0, collapsed_file.rfind('/'))};
  EXPECT_NE(demo.out.find("demo: hottest stacks"), std::string::npos) << demo.out;

  const std::map<std::string, uint64_t> stacks = StackCounts(ReadFile(collapsed_file));
  uint64_t total = 0;
  for (const auto& [stack, count] : stacks) total += count;
  ASSERT_GT(total, 0u) << collapsed_file;
  // checksum_worker, the demo's busiest thread's function (hashlib under it),
  // and the hottest RequestHandler.handle frame with its path from the root:
  // prefix -> samples at and under it.
  bool checksum_sampled = false;
  std::map<std::string, uint64_t> handle_prefixes;
  for (const auto& [stack, count] : stacks) {
    std::optional<CollapsedLine> line = ParseCollapsedStack(stack);
    ASSERT_TRUE(line.has_value()) << stack;
    std::string prefix = stack.substr(0, stack.find(';'));
    for (const std::string& frame : line->frames) {
      prefix += ";" + frame;
      checksum_sampled = checksum_sampled || IsPythonFunction(frame, "checksum_worker", "");
      if (IsPythonFunction(frame, "handle", "RequestHandler")) {
        handle_prefixes[prefix] += count;
        break;
      }
    }
  }
  EXPECT_TRUE(checksum_sampled) << "checksum_worker, the demo's busiest thread, has no samples";
  std::string prefix;
  uint64_t expected = 0;
  for (const auto& [p, count] : handle_prefixes)
    if (count > expected) prefix = p, expected = count;
  ASSERT_FALSE(prefix.empty()) << "RequestHandler.handle has no samples";
  const std::string handle = prefix.substr(prefix.rfind(';') + 1);
  const std::vector<std::string> path = FlameGraphNodePath(prefix, SIZE_MAX);
  const std::optional<PythonFrame> python = ParsePythonFrame(handle);
  ASSERT_TRUE(python.has_value()) << handle;

  const std::string screenshot = std::string(PYPERF_BUILD_DIR) + "/flamegraph-demo.png";
  FlameGraphPageResult page = CheckFlameGraphPage(page_file, path, "checksum", screenshot);
  ASSERT_EQ(page.error, "");
  EXPECT_TRUE(page.console_errors.empty()) << page.console_errors.front();
  EXPECT_EQ(page.legend_missing, "");
  EXPECT_EQ(page.collapsed, stacks);
  EXPECT_TRUE(page.found) << prefix;
  // The box: the file's base name and the qualified name; the tooltip: the
  // full name (its module the script's whole path), file and line.
  EXPECT_EQ(page.label, "demo_workload.RequestHandler.handle");
  EXPECT_EQ(page.tooltip, handle);
  const std::string script = "/examples/cpp/pyperf/demo/demo_workload.py";
  EXPECT_TRUE(python->file.size() > script.size() &&
              python->file.compare(python->file.size() - script.size(), script.size(), script) == 0)
      << python->file;
  EXPECT_EQ(
      page.tooltip.rfind(
          ExpectedModuleOf(python->file) + ".RequestHandler.handle (" + python->file + ":", 0),
      0u)
      << page.tooltip;
  EXPECT_EQ(page.samples, expected) << prefix;
  EXPECT_NEAR(page.percent, 100.0 * expected / total, 0.05);
  EXPECT_TRUE(page.zoomed);
  EXPECT_GE(page.search_matches, 1u);
  std::cout << "[ demo ] " << total << " samples; " << page.label << " (" << page.tooltip
            << "): " << page.samples << " samples, " << page.percent << "% in the page; screenshot "
            << screenshot << std::endl;
}

}  // namespace
}  // namespace pyperf_test
