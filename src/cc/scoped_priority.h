// ScopedPriorityBoost: runs the calling thread at a better nice value until
// Restore() or the end of the scope, then puts the old value back.
//
// PyPerf uses it for its start-up (compiling and loading the BPF program,
// about half a second of CPU): on a host whose cores are all busy, a normal
// priority leaves it waiting for a CPU for many seconds, longer than
// gProfiler's 10 s start-up wait. And for its stop, once sampling has ended
// (the queued events, at most a second, and the last dump), which has a
// deadline too. While sampling, it runs at the priority it was started with,
// so the processes it watches never wait for it.
#pragma once

#include <sys/resource.h>

#include <cerrno>

#include "scoped_undo.h"

namespace ebpf {

class ScopedPriorityBoost {
 public:
  // `steps` nice steps better (lower) than now, at most -20. Without the
  // privilege to raise priority, nothing changes.
  explicit ScopedPriorityBoost(int steps) {
    errno = 0;
    int now = getpriority(PRIO_PROCESS, 0);  // on Linux: this thread
    if (errno != 0) return;
    int boosted = now - steps < -20 ? -20 : now - steps;
    if (boosted < now && setpriority(PRIO_PROCESS, 0, boosted) == 0) original_.Arm(now);
  }

  void Restore() { original_.Restore(); }
  bool boosted() const { return original_.armed(); }

 private:
  static void SetNice(const int& nice) { setpriority(PRIO_PROCESS, 0, nice); }
  ScopedUndo<int> original_{&SetNice};
};

}  // namespace ebpf
