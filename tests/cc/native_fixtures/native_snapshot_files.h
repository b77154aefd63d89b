// Native snapshots on disk: what libpyperf_capture.so writes (regs,
// stack.bin, maps, ready), how to read it back as a ebpf::NativeSnapshot,
// and how to make it self-contained (copies of every mapped file under
// <dir>/root) so it can be replayed after the process is gone, e.g. by a
// Google Benchmark through NativeUnwinder::AddRecordedProcess. The library
// pyperf_native_fixtures, which the tests and bench/ link.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "native_unwinder.h"
#include "status.h"

namespace pyperf_fixture {

using ebpf::Result;
using ebpf::Status;

// The build directory of tests/cc/native_fixtures (programs, libraries).
std::string FixtureDir();
// Where the native_snapshots target records the benchmark's snapshots.
std::string SnapshotDir();
// LD_LIBRARY_PATH for running native_fixture with one variant of the C
// library ("full", "stripped", "debuglink", "minidebug", "buildid", ...).
std::string FixtureLibraryPath(const std::string& variant);
// `python -c SCRIPT libpyperf_capture.so`: the interpreter loads the capture
// library through ctypes and calls pyperf_capture_here() `depth` Python calls
// deep (libffi, _ctypes and eval-loop frames between it and the Python ones).
std::vector<std::string> CtypesCaptureCommand(const std::string& python, int depth);

struct CapturedSnapshot {
  pid_t pid = 0;
  uint64_t ip = 0, sp = 0, bp = 0;
  std::vector<uint8_t> stack;  // bytes at [sp, sp + stack.size())
  std::string maps;            // /proc/PID/maps at capture time
  // For a self-contained recording, where the copies of mapped files are
  // ("<dir>/root"); empty when not recorded.
  std::string root;

  ebpf::NativeSnapshot View() const {
    ebpf::NativeSnapshot s;
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
Result<CapturedSnapshot> ReadCapture(const std::string& dir);
// True once <dir>/ready exists.
bool WaitForCapture(const std::string& dir, std::chrono::milliseconds timeout);
// Copies every file named in <dir>/maps, and the debug file its symbols come
// from, to <dir>/root/<path> (existing copies are kept) and records the root
// in the directory.
Status MakeSelfContained(const std::string& dir);

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
Status RecordSnapshot(const std::vector<std::string>& argv, std::map<std::string, std::string> env,
                      const std::string& dir,
                      std::chrono::milliseconds timeout = std::chrono::seconds(30));

// Reads a self-contained recording and registers it with the unwinder as a
// recorded process (under its original pid).
Result<CapturedSnapshot> LoadRecorded(const std::string& dir, ebpf::NativeUnwinder* unwinder);

}  // namespace pyperf_fixture
