// ScopedNonRootEuid: runs a root process under a non-zero effective uid for
// the life of the object, keeping every capability it has and its file access
// (the filesystem uid stays 0), then puts root back.
//
// Why: libbcc 0.26, compiling any program, reads all of /proc/kallsyms
// (over 100,000 lines, each a string in a hash map, then freed) to learn
// whether bpf_probe_read_kernel exists, and skips that when the effective uid
// is not 0 (as for a PyPerf given CAP_BPF + CAP_PERFMON). It was half of
// PyPerf's start-up CPU (perf record of the start-up). PyPerf's BPF program
// calls the probe-read helpers through its own pointers, so the answer
// changes nothing it loads.
//
// How: SECBIT_NO_SETUID_FIXUP keeps the capability sets when the effective
// uid leaves 0, setfsuid(0) keeps file access as root. Without the privilege
// for any step (no CAP_SETPCAP, a user namespace without the uid), nothing
// changes and libbcc reads kallsyms as before.
#pragma once

#include <linux/securebits.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "scoped_undo.h"

namespace ebpf {

class ScopedNonRootEuid {
 public:
  ScopedNonRootEuid() {
    if (geteuid() != 0) return;  // nothing to hide from libbcc
    const int bits = prctl(PR_GET_SECUREBITS);
    if (bits < 0) return;
    if (!(bits & SECBIT_NO_SETUID_FIXUP) &&
        prctl(PR_SET_SECUREBITS, bits | SECBIT_NO_SETUID_FIXUP) != 0)
      return;
    // Changing the effective uid clears the dumpable flag: restored after.
    const int dumpable = prctl(PR_GET_DUMPABLE);
    if (setresuid(-1, kNobody, -1) != 0) {
      prctl(PR_SET_SECUREBITS, bits);
      return;
    }
    setfsuid(0);  // this thread's file access, as root
    root_.Arm({bits, dumpable});
  }

  void Restore() { root_.Restore(); }
  bool active() const { return root_.armed(); }

 private:
  static constexpr uid_t kNobody = 65534;
  struct Saved {
    int securebits = 0;
    int dumpable = 0;
  };
  static void BackToRoot(const Saved& saved) {
    // The real and saved uids are 0: going back is always allowed.
    if (setresuid(-1, 0, -1) != 0) return;
    setfsuid(0);
    prctl(PR_SET_SECUREBITS, saved.securebits);
    if (saved.dumpable > 0) prctl(PR_SET_DUMPABLE, saved.dumpable);
  }
  ScopedUndo<Saved> root_{&BackToRoot};
};

}  // namespace ebpf
