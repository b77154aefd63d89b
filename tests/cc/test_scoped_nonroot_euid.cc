// ScopedNonRootEuid (src/cc/scoped_nonroot_euid.h): inside the scope the
// process runs under a non-zero effective uid with its capabilities and root
// file access; after it, root, the securebits and the dumpable flag are as
// they were. Each test runs in its own process (gtest_discover_tests), so a
// failed restore cannot leak into another test.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "scoped_nonroot_euid.h"

namespace {

std::string StatusField(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return line.substr(field.size() + 1);
  return "";
}

uid_t CurrentFsuid() { return static_cast<uid_t>(setfsuid(static_cast<uid_t>(-1))); }

// A file only root may read: mode 0600, owned by uid 0.
class RootOnlyFile {
 public:
  RootOnlyFile() {
    char path[] = "/tmp/pyperf-euid-XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) {
      fchmod(fd, 0600);
      close(fd);
      path_ = path;
    }
  }
  ~RootOnlyFile() {
    if (!path_.empty()) unlink(path_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

#define REQUIRE_ROOT()                                                                 \
  if (geteuid() != 0) GTEST_SKIP() << "runs as root only (PyPerf's compile does too)"; \
  static_assert(true)

TEST(ScopedNonRootEuid, RunsUnderANonZeroEuidKeepingCapabilitiesAndRootFileAccess) {
  REQUIRE_ROOT();
  const std::string caps = StatusField("CapEff");
  RootOnlyFile file;
  ASSERT_FALSE(file.path().empty());
  {
    ebpf::ScopedNonRootEuid scope;
    ASSERT_TRUE(scope.active()) << "could not leave euid 0 as root";
    EXPECT_NE(geteuid(), 0u);
    EXPECT_EQ(getuid(), 0u);
    EXPECT_EQ(CurrentFsuid(), 0u);
    EXPECT_EQ(StatusField("CapEff"), caps);
    int fd = open(file.path().c_str(), O_RDONLY);
    EXPECT_GE(fd, 0) << "a root-only file is not readable inside the scope";
    if (fd >= 0) close(fd);
  }
}

TEST(ScopedNonRootEuid, PutsRootSecurebitsAndDumpableBackAsTheyWere) {
  REQUIRE_ROOT();
  const std::string caps = StatusField("CapEff");
  const int bits = prctl(PR_GET_SECUREBITS);
  // Dumpable, as a process normally is (a change of euid clears it).
  ASSERT_EQ(prctl(PR_SET_DUMPABLE, 1), 0);
  const int dumpable = prctl(PR_GET_DUMPABLE);
  {
    ebpf::ScopedNonRootEuid scope;
    ASSERT_TRUE(scope.active());
  }
  uid_t r = 1, e = 1, s = 1;
  ASSERT_EQ(getresuid(&r, &e, &s), 0);
  EXPECT_EQ(r, 0u);
  EXPECT_EQ(e, 0u);
  EXPECT_EQ(s, 0u);
  EXPECT_EQ(CurrentFsuid(), 0u);
  EXPECT_EQ(prctl(PR_GET_SECUREBITS), bits);
  EXPECT_EQ(prctl(PR_GET_DUMPABLE), dumpable);
  EXPECT_EQ(StatusField("CapEff"), caps);
}

TEST(ScopedNonRootEuid, DoesNothingWhenNotRoot) {
  REQUIRE_ROOT();
  // A process already running under another euid keeps it and its bits.
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (setresuid(-1, 65533, -1) != 0) _exit(2);
    const int bits = prctl(PR_GET_SECUREBITS);
    bool ok;
    {
      ebpf::ScopedNonRootEuid scope;
      ok = !scope.active() && geteuid() == 65533 && prctl(PR_GET_SECUREBITS) == bits;
    }
    ok = ok && geteuid() == 65533;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
