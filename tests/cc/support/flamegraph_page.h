// The flame graph page (--format flamegraph) as a user's browser sees it: runs
// tests/js/flamegraph_page.mjs, which opens the page in Debian's chromium
// (headless, playwright-core) and drives its real UI (hover, click, typing
// into the search box), and reads back what it found.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "support/test_stack.h"

namespace pyperf_test {

// Why the page cannot be checked here (no node, no /usr/bin/chromium, or no
// playwright-core in tests/js/node_modules), or nullopt if it can. Tests pass
// it to PYPERF_SKIP_OR_FAIL.
std::optional<std::string> FlameGraphConsumerUnavailable();

struct FlameGraphPageResult {
  std::string error;  // why the check could not run, "" if it ran
  // Console errors, page errors, dialogs (alert & co.) and any network
  // request or failed request, as "<what>: <text>".
  std::vector<std::string> console_errors;
  bool found = false;  // the node at `path` exists
  // What that node's box shows (its label: a Python frame's display name),
  // and the first line of its tooltip (its key: a Python frame's full name,
  // file, line and suffix).
  std::string label;
  std::string tooltip;
  // As the tooltip shows them for that node: its samples (with its
  // descendants') and their percentage of all samples (3 decimals).
  uint64_t samples = 0;
  double percent = 0;
  bool zoomed = false;  // after clicking it, it spans the graph's full width
  // Frames matching `search` (case-insensitive substring of the label), as
  // the page's search status counts them: every matching node of the tree,
  // drawn or too narrow to draw.
  uint64_t search_matches = 0;
  // The page's embedded data turned back into stacks of node keys
  // ("<comm>-<pid>/<tid>;key;..." -> count): for a real run the collapsed
  // stacks, for a synthetic dump EscapedStack(stack,
  // PythonNaming::kFullName) (collapsed.h): the collapsed stacks too.
  std::map<std::string, uint64_t> collapsed;
  // The kinds of the data's nodes (the page's names: "python", "task", ...),
  // and the legend's keys as drawn, kind -> text.
  std::set<std::string> kinds;
  std::map<std::string, std::string> legend;
  // Each kind of the data that the legend does not name (a frame kind's key
  // must show its suffix, "_[pt]"), one line each; "" when it names all.
  std::string legend_missing;
};

// Opens `html_path` in chromium, once, and checks:
//  - the node at `node_path`: keys from the root's child down. A key is
//    "<comm>-<pid>" for a process, "<tid>" (decimal) for a thread, and a
//    frame's text (a Python frame's full name, file and line), escaped and
//    with its suffix, as in the collapsed stack
//    ("calltree.main_busy (/x/calltree.py:66)_[p]"). Empty = no node
//    checked. The node is
//    hovered (zooming into its ancestors first if it is too narrow to draw),
//    its tooltip read, then clicked to zoom, then the zoom reset.
//  - `search` ("" = none) is typed into the search box.
//  - `screenshot_png` ("" = none): a 1280x720 PNG taken with the tooltip shown.

// The keys of the flame graph's node for the first `depth` frames of a
// collapsed stack ("<comm>-<pid>/<tid>;frame;..."), as CheckFlameGraphPage
// takes them; empty if the stack cannot be read back (ParseCollapsedStack).
std::vector<std::string> FlameGraphNodePath(const std::string& stack, size_t depth);
// The same for the first `depth` frames of `stack`, whatever its names.
std::vector<std::string> FlameGraphNodePath(const TestStack& stack, size_t depth);

FlameGraphPageResult CheckFlameGraphPage(const std::string& html_path,
                                         const std::vector<std::string>& node_path,
                                         const std::string& search,
                                         const std::string& screenshot_png);

}  // namespace pyperf_test
