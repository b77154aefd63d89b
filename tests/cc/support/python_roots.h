// Newer CPythons for the tests, never installed on the host: Debian roots
// built by scripts/python-roots.sh (trixie with python3.13, sid with
// python3.14 and python3.15, in $PYPERF_ROOTS_DIR, default
// /var/cache/bcc-pyperf/roots),
// and how to run a program inside one as a container would: its own PID and
// mount namespaces, chrooted (`unshare --pid --mount --fork chroot ROOT ...`).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace pyperf_test {

struct PythonRoot {
  std::string suite;   // "trixie", "sid"
  std::string python;  // the interpreter inside the root, e.g. "/usr/bin/python3.14"
  std::string minor;   // "3.14"
  std::string dir;     // the root on the host
};

// The root `spec` names, built by scripts/python-roots.sh the first time it is
// asked for (once per test process; the script itself is idempotent, caches
// the root and serialises concurrent callers): "SUITE" for the suite's default
// interpreter ("sid": python3.14), "SUITE/PYTHON" for another one the script
// installs there ("sid/python3.15"). nullopt with *why set when the root cannot
// be had (not root, no debootstrap, no mirror) or does not hold that interpreter.
std::optional<PythonRoot> EnsurePythonRoot(const std::string& spec, std::string* why);

// The free-threaded CPython 3.13t scripts/free-threaded-python.sh builds (the
// test command's setup runs it; tests only look): its path, or nullopt with
// *why set when it is not built.
std::optional<std::string> FreeThreadedPython(std::string* why);

// argv that runs `args` (a path inside the root first) in `root` in new PID
// and mount namespaces with a private /proc. The forked child is SIGKILLed
// when unshare dies, so killing the ChildProcess ends the container.
std::vector<std::string> ContainerArgv(const PythonRoot& root,
                                       const std::vector<std::string>& args);

// The direct children of `pid` (from /proc/*/stat), ascending.
std::vector<pid_t> ChildPids(pid_t pid);

// A directory inside a root, removed with its contents on destruction; path()
// is how the host sees it, inside() how the container does.
class RootTempDir {
 public:
  explicit RootTempDir(const PythonRoot& root);
  ~RootTempDir();
  RootTempDir(const RootTempDir&) = delete;
  RootTempDir& operator=(const RootTempDir&) = delete;
  const std::string& path() const { return host_path_; }
  const std::string& inside() const { return inside_path_; }
  // Copies `source` (a host file) with its permission bits to <dir>/<name>;
  // returns the path inside.
  std::string Copy(const std::string& source, const std::string& name) const;

 private:
  std::string host_path_, inside_path_;
};

}  // namespace pyperf_test
