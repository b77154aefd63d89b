// Shared test helpers: see test_support.h.
#include "support/test_support.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "bpf_loader.h"

namespace pyperf_test {

bool StrictMode() {
  const char* v = std::getenv("PYPERF_TEST_STRICT");
  return v && std::string(v) == "1";
}

namespace {
int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) {
  ::remove(path);
  return 0;
}
}  // namespace

std::optional<std::string> BpfUnavailableReason() {
  ebpf::Status privileges = ebpf::CheckBpfPrivileges();
  if (!privileges.ok()) return privileges.message();
  if (access("/sys/kernel/btf/vmlinux", R_OK) != 0)
    return std::string("no kernel BTF at /sys/kernel/btf/vmlinux");
  return std::nullopt;
}

TempDir::TempDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/pyperf-test-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) abort();
  path_ = buf.data();
  chmod(path_.c_str(), 0755);
}

TempDir::~TempDir() { nftw(path_.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS); }

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const Options& options) {
  stdout_path_ = dir_.File("stdout");
  stderr_path_ = dir_.File("stderr");
  pid_ = fork();
  if (pid_ < 0) abort();
  if (pid_ == 0) {
    if (options.new_process_group) setpgid(0, 0);
    int out = open(stdout_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = options.stderr_fd >= 0
                  ? options.stderr_fd
                  : open(stderr_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int in = open("/dev/null", O_RDONLY);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    for (const auto& [k, v] : options.env) setenv(k.c_str(), v.c_str(), 1);
    if (!options.cwd.empty() && chdir(options.cwd.c_str()) != 0) _exit(126);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    dprintf(2, "exec %s failed: %s\n", args[0], strerror(errno));
    _exit(127);
  }
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !reaped_) {
    kill(pid_, SIGKILL);
    int status;
    waitpid(pid_, &status, 0);
  }
}

bool ChildProcess::Running() {
  if (reaped_) return false;
  int status;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    reaped_ = true;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return false;
  }
  return true;
}

void ChildProcess::Signal(int sig) {
  if (!reaped_) kill(pid_, sig);
}

std::optional<int> ChildProcess::Wait(std::chrono::milliseconds timeout) {
  if (WaitFor([&] { return !Running(); }, timeout)) return exit_code_;
  return std::nullopt;
}

std::string ChildProcess::Stdout() const { return ReadFile(stdout_path_); }
std::string ChildProcess::Stderr() const { return ReadFile(stderr_path_); }

CommandResult RunCommand(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                         const ChildProcess::Options& options) {
  ChildProcess child(argv, options);
  CommandResult result;
  if (child.Wait(timeout))
    result.exit_code = child.ExitCode();
  else
    child.Signal(SIGKILL), child.Wait(std::chrono::seconds(5));
  result.out = child.Stdout();
  result.err = child.Stderr();
  return result;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool FileExists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line))
    if (!line.empty()) lines.push_back(line);
  return lines;
}

std::string PyPerfBinary() {
  if (const char* v = std::getenv("PYPERF_BINARY_OVERRIDE")) return v;
  return PYPERF_BINARY;
}

std::string WorkloadPath(const std::string& name) {
  return std::string(PYPERF_TEST_DIR) + "/workloads/" + name;
}

std::string PyenvRoot() {
  if (const char* v = std::getenv("PYENV_ROOT")) return v;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "/root") + "/.pyenv";
}

std::optional<Interpreter> PyenvInterpreter(const std::string& minor) {
  std::string versions = PyenvRoot() + "/versions";
  std::optional<Interpreter> found;
  if (auto* dir = opendir(versions.c_str())) {
    while (auto* e = readdir(dir)) {
      std::string v = e->d_name;
      if (v.rfind(minor + ".", 0) == 0 &&
          v.find_first_not_of("0123456789.", 0) == std::string::npos) {
        std::string path = versions + "/" + v + "/bin/python";
        if (access(path.c_str(), X_OK) == 0) found = Interpreter{"pyenv-" + v, path};
      }
    }
    closedir(dir);
  }
  return found;
}

}  // namespace pyperf_test
