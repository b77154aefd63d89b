// Native snapshots on disk (header-only): what libpyperf_capture.so writes (regs,
// stack.bin, maps, ready), how to read it back as a pyperf::NativeSnapshot,
// and how to make it self-contained (copies of every mapped file under
// <dir>/root) so it can be replayed after the process is gone, e.g. by a
// Google Benchmark through NativeUnwinder::AddRecordedProcess.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "native_module.h"
#include "native_unwinder.h"
#include "status.h"

namespace pyperf_fixture {

namespace fs = std::filesystem;
using pyperf::Result;
using pyperf::Status;

// The build directory of tests/cc/native_fixtures (programs, libraries):
// PYPERF_NATIVE_FIXTURE_DIR, else derived from the test suite's PYPERF_BUILD_DIR.
inline std::string FixtureDir();
// LD_LIBRARY_PATH for running native_fixture with one variant of the C
// library ("full", "stripped", "debuglink", "minidebug", "buildid", ...).
inline std::string FixtureLibraryPath(const std::string& variant);

struct CapturedSnapshot {
  pid_t pid = 0;
  uint64_t ip = 0, sp = 0, bp = 0;
  std::vector<uint8_t> stack;  // bytes at [sp, sp + stack.size())
  std::string maps;            // /proc/PID/maps at capture time
  // For a self-contained recording, where the copies of mapped files are
  // ("<dir>/root"); empty when not recorded.
  std::string root;

  pyperf::NativeSnapshot View() const {
    pyperf::NativeSnapshot s;
    s.pid = pid;
    s.ip = ip;
    s.sp = sp;
    s.bp = bp;
    s.stack = stack.data();
    s.stack_len = stack.size();
    return s;
  }
};

// Reads a capture directory (after WaitForCapture).
inline Result<CapturedSnapshot> ReadCapture(const std::string& dir);
// True once <dir>/ready exists.
inline bool WaitForCapture(const std::string& dir, std::chrono::milliseconds timeout);
// Copies every file named in <dir>/maps, and the debug file its symbols come
// from, to <dir>/root/<path> (existing copies are kept) and records the root
// in the directory.
inline Status MakeSelfContained(const std::string& dir);

// A process started for a capture; killed and reaped on destruction.
class CaptureProcess {
 public:
  CaptureProcess(const std::vector<std::string>& argv,
                 const std::map<std::string, std::string>& env);
  ~CaptureProcess();
  CaptureProcess(const CaptureProcess&) = delete;
  CaptureProcess& operator=(const CaptureProcess&) = delete;
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

// Runs argv with PYPERF_CAPTURE_DIR=dir (plus env), waits for the capture,
// makes it self-contained and stops the process. The scenario is then
// replayable with LoadRecorded.
inline Status RecordSnapshot(const std::vector<std::string>& argv,
                             std::map<std::string, std::string> env, const std::string& dir,
                             std::chrono::milliseconds timeout = std::chrono::seconds(30));

// Reads a self-contained recording and registers it with the unwinder as a
// recorded process (under its original pid).
inline Result<CapturedSnapshot> LoadRecorded(const std::string& dir,
                                             pyperf::NativeUnwinder* unwinder);

// ---- implementation (header-only, so tests need no extra library) ----

namespace detail {
inline bool ReadAll(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}
}  // namespace detail

inline std::string FixtureDir() {
#if defined(PYPERF_NATIVE_FIXTURE_DIR)
  return PYPERF_NATIVE_FIXTURE_DIR;
#elif defined(PYPERF_BUILD_DIR)
  return std::string(PYPERF_BUILD_DIR) + "/tests/cc/native_fixtures";
#else
  return "tests/cc/native_fixtures";
#endif
}

inline std::string FixtureLibraryPath(const std::string& variant) {
  return FixtureDir() + "/" + variant + ":" + FixtureDir();
}

inline Result<CapturedSnapshot> ReadCapture(const std::string& dir) {
  std::string regs, stack, maps, root;
  if (!detail::ReadAll(dir + "/regs", &regs) || !detail::ReadAll(dir + "/stack.bin", &stack) ||
      !detail::ReadAll(dir + "/maps", &maps)) {
    return Status::Error("incomplete capture in " + dir);
  }
  CapturedSnapshot s;
  int pid = 0;
  unsigned long long ip = 0, sp = 0, bp = 0;
  size_t len = 0;
  if (sscanf(regs.c_str(), "pid=%d ip=0x%llx sp=0x%llx bp=0x%llx stack_len=%zu", &pid, &ip, &sp,
             &bp, &len) != 5 ||
      len != stack.size()) {
    return Status::Error("bad regs file in " + dir + ": " + regs);
  }
  s.pid = pid;
  s.ip = ip;
  s.sp = sp;
  s.bp = bp;
  s.stack.assign(stack.begin(), stack.end());
  s.maps = std::move(maps);
  if (detail::ReadAll(dir + "/root_dir", &root) && !root.empty()) s.root = dir + "/root";
  return s;
}

inline bool WaitForCapture(const std::string& dir, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (access((dir + "/ready").c_str(), F_OK) == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

inline Status MakeSelfContained(const std::string& dir) {
  std::string maps;
  if (!detail::ReadAll(dir + "/maps", &maps)) return Status::Error("no maps in " + dir);
  std::istringstream lines(maps);
  std::string line;
  while (std::getline(lines, line)) {
    size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string path = line.substr(slash);
    if (path.size() > 10 && path.compare(path.size() - 10, 10, " (deleted)") == 0) continue;
    // The file, and the debug file its names come from (debuglink or
    // build-id), at the same paths under root.
    std::vector<std::string> files = {path};
    auto module = pyperf::NativeModule::LoadFromPath(path, {"", path, true, true});
    if (module.ok() && !module.value()->debug_file().empty()) {
      files.push_back(module.value()->debug_file());
    }
    for (const auto& file : files) {
      fs::path target = fs::path(dir) / "root" / fs::path(file).relative_path();
      std::error_code ec;
      if (fs::exists(target, ec)) continue;
      fs::create_directories(target.parent_path(), ec);
      fs::copy_file(file, target, ec);
      if (ec) return Status::Error("cannot copy " + file + ": " + ec.message());
    }
  }
  std::ofstream(dir + "/root_dir") << "root\n";
  return Status::Ok();
}

inline CaptureProcess::CaptureProcess(const std::vector<std::string>& argv,
                                      const std::map<std::string, std::string>& env) {
  pid_ = fork();
  if (pid_ == 0) {
    setpgid(0, 0);
    int null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
}

inline CaptureProcess::~CaptureProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    int status;
    waitpid(pid_, &status, 0);
  }
}

inline Status RecordSnapshot(const std::vector<std::string>& argv,
                             std::map<std::string, std::string> env, const std::string& dir,
                             std::chrono::milliseconds timeout) {
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  if (ec) return Status::Error("cannot create " + dir + ": " + ec.message());
  env["PYPERF_CAPTURE_DIR"] = dir;
  CaptureProcess process(argv, env);
  if (process.pid() < 0) return Status::Error("fork failed");
  if (!WaitForCapture(dir, timeout)) return Status::Error("no capture from " + argv[0]);
  return MakeSelfContained(dir);
}

inline Result<CapturedSnapshot> LoadRecorded(const std::string& dir,
                                             pyperf::NativeUnwinder* unwinder) {
  auto snapshot = ReadCapture(dir);
  if (!snapshot.ok()) return snapshot;
  if (snapshot->root.empty()) return Status::Error(dir + " is not self-contained");
  Status s = unwinder->AddRecordedProcess(snapshot->pid, snapshot->maps, snapshot->root);
  if (!s.ok()) return s;
  return snapshot;
}

}  // namespace pyperf_fixture
