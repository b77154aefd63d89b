// The flame graph page (--format flamegraph) as a user's browser sees it: runs
// tests/js/flamegraph_page.mjs, which opens the page in Debian's chromium
// (headless, playwright-core) and drives its real UI (hover, click, typing
// into the search box), and reads back what it found.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

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
  // As the tooltip shows them for that node: its samples (with its
  // descendants') and their percentage of all samples (3 decimals).
  uint64_t samples = 0;
  double percent = 0;
  bool zoomed = false;  // after clicking it, it spans the graph's full width
  // Frames matching `search` (case-insensitive substring of the label), as
  // the page's search status counts them: every matching node of the tree,
  // drawn or too narrow to draw.
  uint64_t search_matches = 0;
  // The page's embedded data turned back into collapsed stacks
  // ("<comm>-<pid>/<tid>;frame;..." -> count), unparseable stacks included
  // verbatim.
  std::map<std::string, uint64_t> collapsed;
};

// Opens `html_path` in chromium, once, and checks:
//  - the node at `node_path`: labels from the root's child down. A label is
//    "<comm>-<pid>" for a process, "<tid>" (decimal) for a thread, and a
//    frame's whole spelling, suffix included, as in the collapsed stack
//    ("calltree.main_busy (/x/calltree.py:66)_[p]"); the unparseable stacks'
//    node is "[Unparseable Stack]_[pe]". Empty = no node checked. The node is
//    hovered (zooming into its ancestors first if it is too narrow to draw),
//    its tooltip read, then clicked to zoom, then the zoom reset.
//  - `search` ("" = none) is typed into the search box.
//  - `screenshot_png` ("" = none): a 1280x720 PNG taken with the tooltip shown.
// The labels of the flame graph's node for the first `depth` frames of a
// collapsed stack ("<comm>-<pid>/<tid>;frame;..."), as CheckFlameGraphPage
// takes them; empty if the stack cannot be read back.
std::vector<std::string> FlameGraphNodePath(const std::string& stack, size_t depth);

FlameGraphPageResult CheckFlameGraphPage(const std::string& html_path,
                                         const std::vector<std::string>& node_path,
                                         const std::string& search,
                                         const std::string& screenshot_png);

}  // namespace pyperf_test
