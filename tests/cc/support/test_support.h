// Shared test helpers: strict-aware skips, real child processes that are always
// killed and reaped, temporary directories, and where the interpreters are.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pyperf_test {

// True when PYPERF_TEST_STRICT=1 (CI): a capability a test needs must exist.
bool StrictMode();

// Skips the test with `reason`, or fails it in strict mode.
#define PYPERF_SKIP_OR_FAIL(reason)                                            \
  do {                                                                         \
    if (::pyperf_test::StrictMode()) {                                         \
      FAIL() << "PYPERF_TEST_STRICT=1 and this test cannot run: " << (reason); \
    } else {                                                                   \
      GTEST_SKIP() << (reason);                                                \
    }                                                                          \
  } while (0)

// Why BPF-based tests cannot run here, or nullopt if they can (root, or
// CAP_BPF+CAP_PERFMON, and /sys/kernel/btf/vmlinux present).
std::optional<std::string> BpfUnavailableReason();

#define PYPERF_REQUIRE_BPF()                              \
  do {                                                    \
    if (auto why = ::pyperf_test::BpfUnavailableReason()) \
      PYPERF_SKIP_OR_FAIL("BPF unavailable: " + *why);    \
  } while (0)

// Skips the test with `reason` (fails it in strict mode) unless `python`, a
// std::optional<Interpreter>, holds an interpreter; then requires BPF.
#define PYPERF_REQUIRE_PYTHON_AND_BPF(python, reason) \
  do {                                                \
    if (!(python)) PYPERF_SKIP_OR_FAIL(reason);       \
    PYPERF_REQUIRE_BPF();                             \
  } while (0)

// A temporary directory removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A child process started with execvp. Its stdout and stderr go to files
// (stderr to `Options::stderr_fd` instead, when given).
// The destructor SIGKILLs it (if still running) and reaps it, so a failing
// test never leaves processes behind.
class ChildProcess {
 public:
  struct Options {
    std::map<std::string, std::string> env;  // added to the environment
    std::string cwd;
    bool new_process_group = true;
    // When >= 0, the child's stderr is this descriptor (e.g. a pipe's write
    // end the test holds), not a file; Stderr() is then empty.
    int stderr_fd = -1;
  };
  ChildProcess(const std::vector<std::string>& argv, const Options& options);
  explicit ChildProcess(const std::vector<std::string>& argv) : ChildProcess(argv, Options{}) {}
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool Running();
  void Signal(int sig);
  // Waits for exit; returns the exit status as from waitpid (nullopt on timeout).
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  // Exit code if exited normally, 128+sig if killed; -1 if still running.
  int ExitCode() const { return exit_code_; }
  std::string Stdout() const;
  std::string Stderr() const;
  const std::string& stdout_path() const { return stdout_path_; }
  const std::string& stderr_path() const { return stderr_path_; }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  int exit_code_ = -1;
  std::string stdout_path_, stderr_path_;
  TempDir dir_;
};

// Runs argv to completion (killing it after `timeout`), returns the child.
struct CommandResult {
  int exit_code = -1;  // 128+signal when killed by a signal; -1 on timeout
  std::string out, err;
};
CommandResult RunCommand(const std::vector<std::string>& argv,
                         std::chrono::milliseconds timeout = std::chrono::seconds(60),
                         const ChildProcess::Options& options = {});

std::string ReadFile(const std::string& path);
bool FileExists(const std::string& path);
std::vector<std::string> SplitLines(const std::string& text);

// Paths from the build.
std::string PyPerfBinary();
std::string WorkloadPath(const std::string& name);  // tests/cc/workloads/<name>

// A Python interpreter the tests run, e.g. {"pyenv-3.11", ".../3.11.7/bin/python"}.
struct Interpreter {
  std::string name;
  std::string path;
};
// pyenv's interpreter for a minor version such as "3.11" (nullopt if absent).
std::optional<Interpreter> PyenvInterpreter(const std::string& minor);
std::string PyenvRoot();

// Polls `pred` every 20 ms until it is true or `timeout` passes.
template <typename Pred>
bool WaitFor(Pred pred, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
}

}  // namespace pyperf_test
