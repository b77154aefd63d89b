// Debian roots with newer CPythons, and containers over them: see python_roots.h.
#include "support/python_roots.h"

#include <dirent.h>
#include <ftw.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "support/test_support.h"

namespace pyperf_test {
namespace {

std::string ScriptPath() { return std::string(PYPERF_SOURCE_DIR) + "/scripts/python-roots.sh"; }

int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) {
  ::remove(path);
  return 0;
}

}  // namespace

std::optional<PythonRoot> EnsurePythonRoot(const std::string& spec, std::string* why) {
  static std::mutex mu;
  static std::map<std::string, std::pair<std::optional<PythonRoot>, std::string>> done;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = done.find(spec); it != done.end()) {
    *why = it->second.second;
    return it->second.first;
  }
  auto remember = [&](std::optional<PythonRoot> root, std::string reason) {
    done[spec] = {root, reason};
    *why = reason;
    return root;
  };
  size_t slash = spec.find('/');
  const std::string suite = spec.substr(0, slash);
  const std::string wanted = slash == std::string::npos ? "" : spec.substr(slash + 1);
  // "SUITE PYTHON ROOT" per interpreter of the suite, its default first,
  // without building anything.
  auto listed = RunCommand({"bash", ScriptPath(), "--print", suite});
  if (listed.exit_code != 0)
    return remember(std::nullopt,
                    "scripts/python-roots.sh --print " + suite + " failed: " + listed.err);
  std::optional<PythonRoot> chosen;
  std::istringstream lines(listed.out);
  for (std::string line; std::getline(lines, line);) {
    PythonRoot root;
    std::string python_name;
    if (!(std::istringstream(line) >> root.suite >> python_name >> root.dir)) continue;
    if (!wanted.empty() && python_name != wanted) continue;
    root.python = "/usr/bin/" + python_name;
    root.minor = python_name.substr(std::string("python").size());
    chosen = root;
    break;
  }
  if (!chosen)
    return remember(std::nullopt, "scripts/python-roots.sh installs no " +
                                      (wanted.empty() ? std::string("interpreter") : wanted) +
                                      " in the " + suite + " root");
  // Building takes a minute or two the first time; then it only checks the stamp.
  auto built = RunCommand({"bash", ScriptPath(), suite}, std::chrono::minutes(15));
  if (built.exit_code != 0) {
    return remember(std::nullopt, "scripts/python-roots.sh " + suite + " exited with " +
                                      std::to_string(built.exit_code) + ": " + built.err);
  }
  if (!FileExists(chosen->dir + chosen->python))
    return remember(std::nullopt, "no " + chosen->python + " in " + chosen->dir);
  return remember(chosen, "");
}

std::optional<std::string> FreeThreadedPython(std::string* why) {
  const std::string script = std::string(PYPERF_SOURCE_DIR) + "/scripts/free-threaded-python.sh";
  auto listed = RunCommand({"bash", script, "--print"});
  std::string version, python;
  std::istringstream in(listed.out);
  if (listed.exit_code != 0 || !(in >> version >> python)) {
    *why = script + " --print failed: " + listed.err;
    return std::nullopt;
  }
  if (access(python.c_str(), X_OK) != 0) {
    *why = "no " + python + " (run " + script + ")";
    return std::nullopt;
  }
  return python;
}

std::vector<std::string> ContainerArgv(const PythonRoot& root,
                                       const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"unshare", "--pid",        "--mount",
                                   "--fork",  "--kill-child", "--mount-proc=" + root.dir + "/proc",
                                   "chroot",  root.dir};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

std::vector<pid_t> ChildPids(pid_t pid) {
  std::vector<pid_t> children;
  DIR* proc = opendir("/proc");
  if (!proc) return children;
  while (struct dirent* e = readdir(proc)) {
    char* end = nullptr;
    long candidate = strtol(e->d_name, &end, 10);
    if (*end != '\0' || candidate <= 0) continue;
    std::string stat = ReadFile("/proc/" + std::string(e->d_name) + "/stat");
    // pid (comm) state ppid ...: comm may hold spaces and parentheses.
    size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 1));
    std::string state;
    long ppid = 0;
    if (rest >> state >> ppid && ppid == pid) children.push_back(static_cast<pid_t>(candidate));
  }
  closedir(proc);
  std::sort(children.begin(), children.end());
  return children;
}

RootTempDir::RootTempDir(const PythonRoot& root) {
  std::string templ = root.dir + "/tmp/pyperf-test-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) abort();
  host_path_ = buf.data();
  chmod(host_path_.c_str(), 0755);
  inside_path_ = host_path_.substr(root.dir.size());
}

RootTempDir::~RootTempDir() { nftw(host_path_.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS); }

std::string RootTempDir::Copy(const std::string& source, const std::string& name) const {
  std::string target = host_path_ + "/" + name;
  {
    std::ifstream in(source, std::ios::binary);
    std::ofstream out(target, std::ios::binary);
    out << in.rdbuf();
  }
  // A program stays executable (closed first: exec of a file open for writing fails).
  struct stat st;
  if (stat(source.c_str(), &st) == 0) chmod(target.c_str(), st.st_mode & 07777);
  return inside_path_ + "/" + name;
}

}  // namespace pyperf_test
