// End-to-end test of the symbol map's aging (issue 11, "days-long runs"):
// with --symbols-map-size 1024, a process that keeps defining new functions
// (new_functions.py: fresh_0, fresh_1, ..., each running about 1 ms once) is
// profiled until more than ten times the map's size of distinct functions
// have been sampled. A map that never let go of entries would name only the
// first ~1000 and print [Lost Symbol] for the rest of the run. Checked, over
// dumps taken with gProfiler's SIGUSR2:
//  - functions keep being named: each dump after the first names functions
//    newer than every earlier dump's, and [Lost Symbol] is under 1% of the
//    samples after the first dump;
//  - never a wrong name: each function runs once, so a name seen in dumps
//    that are not consecutive, or in more than two, came from a retired id
//    resolving to another symbol;
//  - bounded: "symbols in map" on every dump line is at most the map's size,
//    the table's cache (-v 2) at most twice it, and PyPerf's RSS at the end
//    within 20% of its RSS after the first dump.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "support/collapsed.h"
#include "support/e2e.h"
#include "support/test_support.h"

namespace pyperf_test {
namespace {

constexpr uint64_t kMapSize = 1024;
constexpr auto kDeadline = seconds(240);

// "fresh_N" frames of a dump: N -> samples.
std::map<long, uint64_t> FreshFunctions(const CollapsedProfile& profile) {
  static const std::regex fresh(R"(fresh_(\d+) \()");
  std::map<long, uint64_t> out;
  for (const auto& line : profile.lines)
    for (const auto& frame : line.frames) {
      std::smatch m;
      if (std::regex_search(frame, m, fresh)) out[std::stol(m[1])] += line.count;
    }
  return out;
}

uint64_t LostSymbolSamples(const CollapsedProfile& profile) {
  uint64_t n = 0;
  for (const auto& line : profile.lines)
    for (const auto& frame : line.frames)
      if (frame.find("[Lost Symbol]") != std::string::npos) {
        n += line.count;
        break;
      }
  return n;
}

// The last "symbols: ... cached N" PyPerf logged at -v 2.
std::optional<uint64_t> LastCachedSymbols(const std::string& stderr_text) {
  static const std::regex cached(R"(PyPerf: symbols: in map \d+ of \d+, cached (\d+))");
  std::optional<uint64_t> last;
  for (std::sregex_iterator it(stderr_text.begin(), stderr_text.end(), cached), end; it != end;
       ++it)
    last = std::stoull((*it)[1]);
  return last;
}

class SymbolAging : public PythonWorkloadTest {
 protected:
  SymbolAging() : PythonWorkloadTest("new_functions.py", "3.11") {}
};

TEST_F(SymbolAging, TenTimesTheMapsSizeOfNewFunctionsAreNamedNeverMisnamed) {
  TempDir dir;
  const std::string out = dir.File("profile");
  auto pyperf =
      StartPyPerf({"-v", "2", "-F", "1000", "--symbols-map-size", std::to_string(kMapSize),
                   "--user-stacks-pages", "0", "-o", out, "-p", std::to_string(workload_->pid())});
  ASSERT_TRUE(WaitForStderr(*pyperf, "Ready to profile", kDeadline)) << pyperf->Stderr();

  struct Dump {
    std::map<long, uint64_t> fresh;
    uint64_t samples = 0, lost_symbols = 0, in_map = 0;
  };
  std::vector<Dump> dumps;
  std::set<long> named;
  uint64_t rss_after_first = 0;
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (named.size() < 10 * kMapSize && std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(WaitForCpu(workload_->pid(), seconds(2))) << "the workload did not run";
    auto line = RequestDump(*pyperf, seconds(60));
    ASSERT_TRUE(line && !DumpOutputPath(*line).empty()) << "no dump; stderr:\n" << pyperf->Stderr();
    CollapsedProfile profile = ParseCollapsed(ReadFile(DumpOutputPath(*line)));
    Dump d;
    d.fresh = FreshFunctions(profile);
    d.samples = profile.TotalSamples();
    d.lost_symbols = LostSymbolSamples(profile);
    d.in_map = DumpCounter(*line, "symbols in map").value_or(~0ull);
    for (const auto& [n, count] : d.fresh) named.insert(n);
    std::cout << "[ e2e ] dump " << dumps.size() + 1 << ": " << d.samples << " samples, "
              << d.fresh.size() << " fresh functions named ("
              << (d.fresh.empty() ? 0 : d.fresh.begin()->first) << ".."
              << (d.fresh.empty() ? 0 : d.fresh.rbegin()->first) << "), " << d.lost_symbols
              << " [Lost Symbol], symbols in map " << d.in_map << ", "
              << DumpCounter(*line, "symbols retired").value_or(0) << " retired" << std::endl;
    dumps.push_back(std::move(d));
    if (dumps.size() == 1) rss_after_first = VmRssKiB(pyperf->pid());
    if (dumps.size() > 1 && dumps.back().fresh.empty()) break;  // the map is stuck
  }
  const uint64_t rss_end = VmRssKiB(pyperf->pid());
  pyperf->Signal(SIGTERM);
  PyPerfRun run = FinishPyPerf(*pyperf, "PyPerf over new functions", seconds(60));
  ASSERT_GE(named.size(), 10 * kMapSize)
      << "the run named only " << named.size() << " distinct functions in " << dumps.size()
      << " dumps; stderr:\n"
      << run.stderr_text;
  ASSERT_GE(dumps.size(), 3u);

  // Named throughout: every dump after the first names functions newer than
  // any earlier dump's; [Lost Symbol] under 1% after the first.
  long newest = -1;
  uint64_t samples = 0, lost = 0;
  for (size_t i = 0; i < dumps.size(); ++i) {
    const Dump& d = dumps[i];
    EXPECT_LE(d.in_map, kMapSize) << "dump " << i + 1;
    if (i > 0) {
      samples += d.samples;
      lost += d.lost_symbols;
      ASSERT_FALSE(d.fresh.empty()) << "dump " << i + 1 << " names no function";
      EXPECT_GT(d.fresh.rbegin()->first, newest) << "dump " << i + 1 << " names no new function";
    }
    if (!d.fresh.empty()) newest = std::max(newest, d.fresh.rbegin()->first);
  }
  EXPECT_LT(lost * 100, samples) << lost << " of " << samples
                                 << " samples after the first dump have [Lost Symbol]";

  // Never misnamed: a function runs once, so its samples fall in one dump,
  // or two consecutive ones when a dump cut it.
  std::map<long, std::vector<size_t>> dumps_of;
  for (size_t i = 0; i < dumps.size(); ++i)
    for (const auto& [n, count] : dumps[i].fresh) dumps_of[n].push_back(i);
  size_t misnamed = 0;
  for (const auto& [n, in] : dumps_of) {
    if (in.size() == 1 || (in.size() == 2 && in[1] == in[0] + 1)) continue;
    if (++misnamed <= 5)
      ADD_FAILURE() << "fresh_" << n << " named in " << in.size() << " dumps, "
                    << "the first " << in[0] + 1 << ", the last " << in.back() + 1;
  }
  EXPECT_EQ(misnamed, 0u);

  // Bounded.
  auto cached = LastCachedSymbols(run.stderr_text);
  ASSERT_TRUE(cached.has_value()) << run.stderr_text;
  EXPECT_LE(*cached, 2 * kMapSize);
  std::cout << "[ e2e ] " << named.size() << " distinct functions named in " << dumps.size()
            << " dumps; PyPerf RSS " << rss_after_first << " KiB after the first, " << rss_end
            << " KiB at the end; symbols cached at the end: " << *cached << std::endl;
  EXPECT_LE(rss_end * 100, rss_after_first * 120);
}

}  // namespace
}  // namespace pyperf_test
