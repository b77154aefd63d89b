// PyPerf compiles and loads its BPF program at the best nice value (so busy
// cores do not hold its start-up for seconds), and samples at the one it was
// started with: once "Ready to profile" is printed, every thread of PyPerf
// runs at the priority its parent gave it, never above the processes it
// watches.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "support/e2e.h"
#include "support/test_support.h"

namespace pyperf_test {
namespace {

// The nice value of each thread of pid (field 19 of /proc/PID/task/TID/stat).
std::vector<int> ThreadNiceValues(pid_t pid) {
  std::vector<int> values;
  std::string task_dir = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& entry : std::filesystem::directory_iterator(task_dir)) {
    std::ifstream in(entry.path() / "stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(text.substr(close + 2));
    std::string field;
    // After ')', the first field is the state (field 3); nice is field 19.
    for (int i = 3; i <= 19 && fields >> field; ++i)
      if (i == 19) values.push_back(std::stoi(field));
  }
  return values;
}

// Runs the calling thread at `nice` for the life of the object (children
// started meanwhile inherit it).
class ScopedNice {
 public:
  explicit ScopedNice(int nice) {
    errno = 0;
    original_ = getpriority(PRIO_PROCESS, 0);
    ok_ = errno == 0 && setpriority(PRIO_PROCESS, 0, nice) == 0;
  }
  ~ScopedNice() {
    if (ok_) setpriority(PRIO_PROCESS, 0, original_);
  }
  bool ok() const { return ok_; }

 private:
  int original_ = 0;
  bool ok_ = false;
};

TEST(StartupPriority, SamplingRunsAtThePriorityPyPerfWasStartedWith) {
  PYPERF_REQUIRE_BPF();
  constexpr int kStartedNice = 7;
  std::unique_ptr<ChildProcess> pyperf;
  {
    ScopedNice nice(kStartedNice);
    ASSERT_TRUE(nice.ok()) << strerror(errno);
    pyperf = StartPyPerf({"-F", "49", "-d", "30"});
  }
  ASSERT_TRUE(WaitForStderr(*pyperf, "Ready to profile", std::chrono::seconds(120)))
      << pyperf->Stderr();
  std::vector<int> nice = ThreadNiceValues(pyperf->pid());
  ASSERT_FALSE(nice.empty());
  for (int value : nice) EXPECT_EQ(value, kStartedNice) << "a thread of PyPerf at nice " << value;
  pyperf->Signal(SIGTERM);
  auto status = pyperf->Wait(std::chrono::seconds(30));
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(pyperf->ExitCode(), 0) << pyperf->Stderr();
}

}  // namespace
}  // namespace pyperf_test
