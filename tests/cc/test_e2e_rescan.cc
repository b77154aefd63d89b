// PyPerf keeps reading its perf rings while a rescan of /proc takes in many
// new processes. A rescan reads every process's start time and inspects each
// new one (its maps, its interpreter's file, the BPF maps it fills); on a
// busy host that lasts longer than half a ring of samples, the headroom a
// ring has while nobody reads it. Two busy interpreters are sampled at -F 999
// while 150 new Python processes appear; PyPerf's -v 4 line of each rescan
// says how many events it read while the rescan ran. A PyPerf that reads the
// rings only between rescans reads none, and fails. No figure of time is
// asserted: a busier machine makes the rescans longer and the count larger.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "support/e2e.h"
#include "support/test_support.h"

namespace pyperf_test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kNewProcesses = 150;

// PyPerf's -v 4 rescan line (README, "-v").
struct Rescan {
  uint64_t alive = 0, profiled = 0, events_read = 0;
};

std::vector<Rescan> Rescans(const std::string& stderr_text) {
  static const std::regex line(
      R"(PyPerf: rescan: (\d+) processes alive, (\d+) profiled, (\d+) events read during it)");
  std::vector<Rescan> out;
  for (std::sregex_iterator it(stderr_text.begin(), stderr_text.end(), line), end; it != end;
       ++it) {
    out.push_back({std::stoull((*it)[1]), std::stoull((*it)[2]), std::stoull((*it)[3])});
  }
  return out;
}

TEST(Rescan, ReadsTheRingsWhileItTakesInManyNewProcesses) {
  auto python = AnyInterpreter();
  if (!python) PYPERF_SKIP_OR_FAIL("no Python interpreter to profile");
  PYPERF_REQUIRE_BPF();

  ChildProcess busy1({python->path, "-c", "while 1: pass"});
  ChildProcess busy2({python->path, "-c", "while 1: pass"});
  // The whole host, as gProfiler runs it, rescanning every 2 s.
  auto pyperf = StartPyPerf({"-F", "999", "-v", "4", "--update-interval", "2"});
  ASSERT_TRUE(WaitForStderr(*pyperf, "Ready to profile", seconds(120))) << pyperf->Stderr();
  ASSERT_TRUE(WaitForCpu(busy1.pid(), milliseconds(300)));
  const size_t before = Rescans(pyperf->Stderr()).size();
  ASSERT_GE(before, 1u) << "no -v 4 rescan line:\n" << pyperf->Stderr();
  const uint64_t profiled_before = Rescans(pyperf->Stderr()).back().profiled;

  // Idle interpreters (-S: no site import, a quicker start), all alive until
  // the end of the test.
  std::vector<std::unique_ptr<ChildProcess>> sleepers;
  for (int i = 0; i < kNewProcesses; ++i) {
    sleepers.push_back(std::make_unique<ChildProcess>(
        std::vector<std::string>{python->path, "-S", "-c", "import time; time.sleep(600)"}));
  }
  // Until a rescan has taken in every one of them.
  const bool all_in = WaitFor(
      [&] {
        auto rescans = Rescans(pyperf->Stderr());
        return rescans.size() > before &&
               rescans.back().profiled >= profiled_before + kNewProcesses;
      },
      seconds(120));
  pyperf->Signal(SIGTERM);
  ASSERT_TRUE(pyperf->Wait(seconds(60)).has_value());
  const std::string text = pyperf->Stderr();
  ASSERT_TRUE(all_in) << "no rescan took in the " << kNewProcesses << " new processes:\n"
                      << text.substr(text.size() > 4000 ? text.size() - 4000 : 0);

  // The rescans that took in new processes, and the events read meanwhile.
  auto rescans = Rescans(text);
  uint64_t taken_in = 0, events_read = 0, previous = rescans[before - 1].profiled;
  for (size_t i = before; i < rescans.size(); ++i) {
    const Rescan& r = rescans[i];
    if (r.profiled > previous) {
      taken_in += r.profiled - previous;
      events_read += r.events_read;
      std::cout << "[ e2e ] a rescan took in " << r.profiled - previous << " processes (" << r.alive
                << " alive) and read " << r.events_read << " events meanwhile" << std::endl;
    }
    previous = r.profiled;
  }
  EXPECT_GE(taken_in, static_cast<uint64_t>(kNewProcesses));
  EXPECT_GT(events_read, 0u) << "PyPerf read no event while its rescans inspected " << taken_in
                             << " new processes beside two busy ones sampled at -F 999";
}

}  // namespace
}  // namespace pyperf_test
