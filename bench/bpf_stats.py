"""What a profiler costs beyond its own CPU time, read from /proc, for the
bench scripts: the run time of its BPF programs, and its memory.

PyPerf's BPF program runs on the sampled CPU, in the context of whatever task
was running there, so its time is charged to that task (the profiled process,
another one, or the idle task), never to PyPerf. The kernel counts it per
program (run_time_ns, run_cnt) only while kernel.bpf_stats_enabled is 1,
since counting costs two clock reads per run; the counters show in
/proc/PID/fdinfo/FD of every fd of the program (no bpftool needed). A tail
call skips the counting, so the programs on_sample tail-calls
(find_thread_state, walk_python_stack) keep 0 and their time is in
on_sample's.

  with bpf_stats.stats_enabled():          # kernel.bpf_stats_enabled=1 in here
      before = bpf_stats.prog_stats(pid)   # ProgStats(run_time_ns, run_cnt)
      ...
      spent = bpf_stats.prog_stats(pid) - before
  rss_kib, pss_kib = bpf_stats.memory_kib(pid)
  ns = bpf_stats.cpu_ns(pid)

stats_enabled() puts the previous value back however the block ends: on an
exception, Ctrl-C (KeyboardInterrupt) and, as it turns SIGTERM into
SystemExit for the block's duration, SIGTERM. Only SIGKILL of the bench
leaves it at 1. The sysctl is host-wide: if another process sets it to 0
during the block, the kernel stops counting, and stats_enabled() says so on
stderr at the end; if another enables it during the block, the restore turns
it off under that one.
"""
import collections
import contextlib
import os
import signal
import sys
import time

STATS_SYSCTL = "/proc/sys/kernel/bpf_stats_enabled"


@contextlib.contextmanager
def stats_enabled():
    """kernel.bpf_stats_enabled=1 for the block, then as it was."""
    with open(STATS_SYSCTL) as f:
        previous = f.read().strip()

    def on_sigterm(signum, frame):
        sys.exit(128 + signum)  # SystemExit: the finally below runs

    old_handler = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        with open(STATS_SYSCTL, "w") as f:
            f.write("1")
        yield
    finally:
        with open(STATS_SYSCTL) as f:
            changed = f.read().strip() != "1"
        with open(STATS_SYSCTL, "w") as f:
            f.write(previous)
        signal.signal(signal.SIGTERM, old_handler)
        if changed:  # the kernel stopped counting at some point: figures too low
            print("bpf_stats: another process set %s to 0 during the run: in-kernel "
                  "figures may miss time" % STATS_SYSCTL, file=sys.stderr)


class ProgStats(collections.namedtuple("ProgStats", "run_time_ns run_cnt")):
    """Run time and runs of a process's BPF programs; a - b is their change."""

    def __sub__(self, other):
        return ProgStats(self.run_time_ns - other.run_time_ns, self.run_cnt - other.run_cnt)


def prog_stats(pid):
    """run_time_ns and run_cnt summed over the BPF programs pid holds an fd of,
    each program once (by prog_id) however many fds it has."""
    by_id = {}
    fd_dir = "/proc/%d/fd" % pid
    for fd in os.listdir(fd_dir):
        try:
            if os.readlink(os.path.join(fd_dir, fd)) != "anon_inode:bpf-prog":
                continue
            with open("/proc/%d/fdinfo/%s" % (pid, fd)) as f:
                info = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:  # closed since listdir
            continue
        by_id[info["prog_id"].strip()] = ProgStats(int(info["run_time_ns"]),
                                                   int(info["run_cnt"]))
    return ProgStats(sum(s.run_time_ns for s in by_id.values()),
                     sum(s.run_cnt for s in by_id.values()))


def memory_kib(pid):
    """(RSS, PSS) of pid in KiB, from /proc/PID/smaps_rollup. PSS divides
    each page among the processes that map it: pid's share of the host's
    memory."""
    found = {}
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("Rss", "Pss"):
                found[key] = int(rest.split()[0])
    return found["Rss"], found["Pss"]


def cpu_ns(pid):
    """pid's CPU time in ns from its process CPU clock (clock_getcpuclockid's):
    the scheduler's run time summed over all its threads, ended ones
    included. Finer than utime + stime (clock ticks) and, unlike
    /proc/PID/schedstat, not only the main thread's."""
    clock = ((~pid) << 3) | 2  # MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)
    return time.clock_gettime_ns(clock)
