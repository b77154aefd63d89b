// Native snapshots on disk: see native_snapshot_files.h.
#include "native_snapshot_files.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "native_module.h"
#include "proc_maps.h"
#include "read_file.h"

namespace pyperf_fixture {

namespace fs = std::filesystem;

std::string FixtureDir() { return PYPERF_NATIVE_FIXTURE_DIR; }

std::string SnapshotDir() { return FixtureDir() + "/snapshots"; }

std::string FixtureLibraryPath(const std::string& variant) {
  return FixtureDir() + "/" + variant + ":" + FixtureDir();
}

std::vector<std::string> CtypesCaptureCommand(const std::string& python, int depth) {
  const std::string script =
      "import ctypes, sys\n"
      "lib = ctypes.CDLL(sys.argv[1])\n"
      "def descend(n):\n"
      "    if n == 0:\n"
      "        lib.pyperf_capture_here()\n"
      "    return descend(n - 1)\n"
      "descend(" +
      std::to_string(depth) + ")\n";
  return {python, "-c", script, FixtureDir() + "/libpyperf_capture.so"};
}

Result<CapturedSnapshot> ReadCapture(const std::string& dir) {
  auto regs = ebpf::ReadFile(dir + "/regs");
  auto stack = ebpf::ReadFile(dir + "/stack.bin");
  auto maps = ebpf::ReadFile(dir + "/maps");
  if (!regs.ok() || !stack.ok() || !maps.ok()) {
    return Status::Error("incomplete capture in " + dir);
  }
  CapturedSnapshot s;
  int pid = 0;
  unsigned long long ip = 0, sp = 0, bp = 0;
  size_t len = 0;
  if (sscanf(regs->c_str(), "pid=%d ip=0x%llx sp=0x%llx bp=0x%llx stack_len=%zu", &pid, &ip, &sp,
             &bp, &len) != 5 ||
      len != stack->size()) {
    return Status::Error("bad regs file in " + dir + ": " + *regs);
  }
  s.pid = pid;
  s.ip = ip;
  s.sp = sp;
  s.bp = bp;
  s.stack.assign(stack->begin(), stack->end());
  s.maps = std::move(maps).value();
  auto root = ebpf::ReadFile(dir + "/root_dir");
  if (root.ok() && !root->empty()) s.root = dir + "/root";
  return s;
}

bool WaitForCapture(const std::string& dir, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (access((dir + "/ready").c_str(), F_OK) == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

Status MakeSelfContained(const std::string& dir) {
  auto text = ebpf::ReadFile(dir + "/maps");
  if (!text.ok()) return Status::Error("no maps in " + dir + ": " + text.error());
  auto maps = ebpf::ParseProcMaps(*text);
  if (!maps.ok()) return Status::Error(dir + "/maps: " + maps.error());
  std::set<std::string> done;
  for (const ebpf::MemoryMapping& mapping : *maps) {
    // A deleted file is gone: the recording names it module+0xADDR.
    if (!mapping.is_file() || mapping.deleted || !done.insert(mapping.path).second) continue;
    const std::string& path = mapping.path;
    // The file, and the debug file its names come from (debuglink or
    // build-id), at the same paths under root.
    std::vector<std::string> files = {path};
    auto module = ebpf::NativeModule::LoadFromPath(path, {"", path, true, true});
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

CaptureProcess::CaptureProcess(const std::vector<std::string>& argv,
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

CaptureProcess::~CaptureProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    int status;
    waitpid(pid_, &status, 0);
  }
}

Status RecordSnapshot(const std::vector<std::string>& argv, std::map<std::string, std::string> env,
                      const std::string& dir, std::chrono::milliseconds timeout) {
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

Result<CapturedSnapshot> LoadRecorded(const std::string& dir, ebpf::NativeUnwinder* unwinder) {
  auto snapshot = ReadCapture(dir);
  if (!snapshot.ok()) return snapshot;
  if (snapshot->root.empty()) return Status::Error(dir + " is not self-contained");
  Status s = unwinder->AddRecordedProcess(snapshot->pid, snapshot->maps, snapshot->root);
  if (!s.ok()) return s;
  return snapshot;
}

}  // namespace pyperf_fixture
