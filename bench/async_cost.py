#!/usr/bin/env python3
"""What --async-tasks costs per sample, in the kernel and in PyPerf (issue 37).

For each interpreter of Debian sid's root (scripts/python-roots.sh: 3.14 and
3.15, the versions with asyncio task state), one workload runs chrooted in
the root: tests/cc/workloads/async_tasks.py, the asyncio service of the
end-to-end test, whose running task is 4 tasks deep (11 for its "deep"
request, cut at 8). PyPerf runs on it without and with --async-tasks in turn
(A B A B ..., --repeats times), each run

  PyPerf -F FREQUENCY -p PID --user-stacks-pages 2 [--async-tasks]

for --seconds after "Ready to profile", measured as bench/frame_cost.py does:
in-kernel µs per sample (the change of run_time_ns of PyPerf's BPF programs,
kernel.bpf_stats_enabled=1 for the run only) and PyPerf's own CPU µs per
sample. One row per run, then per interpreter the medians and the difference
the mode makes. "tasks %" is the share of the workload's samples that start
with task frames (`_[pt]`).

  bench/async_cost.py [--pyperf PATH] [--seconds 10] [--frequency 499] [--repeats 3]
      [--pythons 3.14,3.15]

Needs root (BPF, chroot, the sysctl). Prints figures; never fails on timing.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

import bpf_stats  # bench/ is on sys.path when a script in it runs
from frame_cost import per_sample_us, run_pyperf
from overhead import after_chroot, die_with_parent, in_root

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, ".."))
WORKLOAD = os.path.join(REPO, "tests", "cc", "workloads", "async_tasks.py")
ROOT = os.path.join(os.environ.get("PYPERF_ROOTS_DIR", "/var/cache/bcc-pyperf/roots"), "sid")
PAGES = 2
MODES = (("leaf", []), ("async-tasks", ["--async-tasks"]))


def start_workload(python, directory):
    """The workload chrooted in the root; returns (process, the interpreter's pid)."""
    inside = "/" + os.path.relpath(directory, ROOT)
    proc = subprocess.Popen(in_root(ROOT, [python, inside + "/async_tasks.py"]),
                            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            preexec_fn=die_with_parent)
    if proc.stdout.readline().decode().strip() != "ready":
        proc.kill()
        proc.wait()
        raise RuntimeError("the workload on %s did not start" % python)
    return proc, after_chroot(proc.pid) or proc.pid


def task_share(collapsed, pid):
    tag, total, tasks = "-%d/" % pid, 0, 0
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        if not stack or tag not in frames[0]:
            continue
        total += int(count)
        if any(f.endswith("_[pt]") for f in frames[1:]):
            tasks += int(count)
    return 100.0 * tasks / total if total else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pyperf",
                    default=os.path.join(REPO, "build", "examples", "cpp", "pyperf", "PyPerf"))
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--frequency", type=int, default=499)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--pythons", default="3.14,3.15")
    args = ap.parse_args()
    pythons = ["/usr/bin/python" + v for v in args.pythons.split(",") if v]
    for python in pythons:
        if not os.access(ROOT + python, os.X_OK):
            sys.exit("async_cost.py: no %s in %s: run scripts/python-roots.sh sid"
                     % (python, ROOT))
    if not os.access(args.pyperf, os.X_OK):
        sys.exit("async_cost.py: no PyPerf at %s" % args.pyperf)
    print("PyPerf -F %d -p PID --user-stacks-pages %d [--async-tasks], %g s per run; "
          "%d CPUs, load %s" % (args.frequency, PAGES, args.seconds, os.cpu_count(),
                                " ".join("%.2f" % l for l in os.getloadavg())))
    print("%-16s %-12s %7s %8s %9s %7s %8s" % ("python", "mode", "samples", "tasks %",
                                               "kernel µs", "own µs", "total µs"))
    results = {}
    try:
        with bpf_stats.stats_enabled(), tempfile.TemporaryDirectory(dir=ROOT + "/tmp") as d:
            shutil.copy(WORKLOAD, d)
            for python in pythons:
                proc, pid = start_workload(python, d)
                try:
                    for _ in range(args.repeats):
                        for mode, extra in MODES:
                            r = run_pyperf(args.pyperf, pid, PAGES, args.seconds,
                                           args.frequency, extra)
                            kernel = per_sample_us(r["kernel"].run_time_ns, r["samples"])
                            own = per_sample_us(r["cpu_ns"], r["samples"])
                            results.setdefault((python, mode), []).append((kernel, own))
                            print("%-16s %-12s %7d %8.1f %9.2f %7.2f %8.2f"
                                  % (python, mode, r["samples"],
                                     task_share(r["collapsed"], pid), kernel, own,
                                     kernel + own), flush=True)
                finally:
                    proc.kill()
                    proc.wait()
    except (OSError, RuntimeError, subprocess.TimeoutExpired) as e:
        sys.exit("async_cost.py: %s" % e)
    print("load at the end %s" % " ".join("%.2f" % l for l in os.getloadavg()))
    print("\nmedians (µs per sample): kernel, own; and what --async-tasks adds")
    for python in pythons:
        k0 = statistics.median(k for k, _ in results[(python, "leaf")])
        o0 = statistics.median(o for _, o in results[(python, "leaf")])
        k1 = statistics.median(k for k, _ in results[(python, "async-tasks")])
        o1 = statistics.median(o for _, o in results[(python, "async-tasks")])
        print("  %-16s without %6.2f %6.2f   with %6.2f %6.2f   added: kernel %+6.2f, own %+6.2f"
              % (python, k0, o0, k1, o1, k1 - k0, o1 - o0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
