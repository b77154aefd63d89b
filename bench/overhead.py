#!/usr/bin/env python3
"""PyPerf's cost per sample beside Austin's, on one workload, in one run.

The workload is N CPython 3.13 processes running `while 1: pass`, started in
the Debian trixie root that the tests build (scripts/python-roots.sh; the root
also holds Debian's `austin`). One after another, each profiler samples them
for D seconds at F Hz:

  python-only    PyPerf --user-stacks-pages 0
  native-cache   PyPerf with native stacks, symbol cache on (the default)
  native-nocache PyPerf with native stacks, --native-cache off
  austin         Austin (Python stacks only, reads the processes from user space)

and the table gives, per profiler: its CPU time (utime + stime) per sample in
microseconds, counted from "Ready to profile" (PyPerf) or over its whole run
(Austin, whose attach costs next to nothing); that CPU as a share of one core; samples taken and
lost; for PyPerf the wall and CPU time to "Ready to profile". Prints figures;
never fails on timing.

  bench/overhead.py [--pyperf build/examples/cpp/pyperf/PyPerf] [--processes 10]
      [--seconds 30] [--frequency 99] [--modes python-only,native-cache,native-nocache,austin]
      [--repeats 1] [--perf-record MODE]

--perf-record MODE records PyPerf's own CPU in that mode with `perf record -g`
(Debian's linux-perf) and prints the top of `perf report` after the table.
"""
import argparse
import ctypes
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, ".."))
DEFAULT_PYPERF = os.path.join(REPO, "build", "examples", "cpp", "pyperf", "PyPerf")
READY = "Ready to profile"
MODES = ("python-only", "native-cache", "native-nocache", "austin")

# The workload's parent: starts N children that spin, waits for a signal.
SPAWNER = r"""
import os, signal, sys
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])
kids = []
for _ in range(int(sys.argv[1])):
    pid = os.fork()
    if pid == 0:
        try:  # die with the parent, however it ends
            import ctypes
            ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except Exception:
            pass
        while 1: pass
    kids.append(pid)
print(" ".join(map(str, kids)), flush=True)
signal.sigwait([signal.SIGTERM])
for k in kids:
    os.kill(k, signal.SIGKILL)
for k in kids:
    os.waitpid(k, 0)
"""


def die_with_parent():
    """Child setup: SIGKILL when the bench dies, so nothing it starts outlives it."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[0] is field 3 (state); utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / float(CLK_TCK)


def in_root(root, argv):
    """argv run chrooted in `root`, in the host's mount and pid namespaces (the
    root's /proc is the host's, bind-mounted by ProcMount), so that the bench,
    PyPerf and Austin see the same pids and the same paths."""
    return ["chroot", root] + argv


class ProcMount:
    """The host's /proc bind-mounted on ROOT/proc for the bench's lifetime."""

    def __init__(self, root):
        self.target = os.path.join(root, "proc")
        self.mounted = False
        if not os.path.ismount(self.target):
            subprocess.run(["mount", "--bind", "/proc", self.target], check=True)
            self.mounted = True

    def close(self):
        if self.mounted:
            subprocess.run(["umount", "-l", self.target], check=False)
            self.mounted = False


def after_chroot(pid):
    """pid once chroot has exec'd the program it runs (None if it ended)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with open("/proc/%d/comm" % pid) as f:
                if f.read().strip() != "chroot":
                    return pid
        except OSError:
            return None
        time.sleep(0.01)
    return None


def read_lines_until(stream, pattern, seconds):
    """Lines from a text pipe until one contains pattern: (lines, found)."""
    sel = selectors.DefaultSelector()
    sel.register(stream, selectors.EVENT_READ)
    lines, buf, deadline = [], b"", time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not sel.select(timeout=0.5):
            continue
        data = os.read(stream.fileno(), 65536)
        if not data:
            break
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            text = line.decode("utf-8", "replace")
            lines.append(text)
            if pattern in text:
                return lines, True
    return lines, False


def dump_counter(text, key):
    found = re.findall(re.escape(key) + r": ([0-9.]+)", text)
    return float(found[-1]) if found else float("nan")


def perf_report(pid, seconds, out_dir):
    data = os.path.join(out_dir, "perf.data")
    rec = subprocess.run(["perf", "record", "-g", "-q", "-o", data, "-p", str(pid), "--",
                          "sleep", str(seconds)], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    if rec.returncode != 0:
        return "perf record failed: " + rec.stderr.strip()
    rep = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children",
                          "--percent-limit", "2", "-g", "none", "--sort", "dso,symbol"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return "\n".join(l for l in rep.stdout.splitlines() if l.strip() and not l.startswith("#"))


def run_pyperf(pyperf, mode, pids, seconds, frequency, record):
    out_dir = tempfile.mkdtemp(prefix="pyperf-overhead-")
    cmd = [pyperf, "-F", str(frequency), "--events-buffer-pages", "256",
           "--symbols-map-size", "131072", "-o", os.path.join(out_dir, "out.col")]
    if mode == "python-only":
        cmd += ["--user-stacks-pages", "0"]
    elif mode == "native-nocache":
        cmd += ["--native-cache", "off"]
    for pid in pids:
        cmd += ["-p", str(pid)]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
    report = None
    try:
        _, ready = read_lines_until(proc.stderr, READY, 120)
        if not ready:
            raise RuntimeError("PyPerf (%s) did not print %r" % (mode, READY))
        ready_wall = time.monotonic() - started
        ready_cpu = cpu_seconds(proc.pid)
        if record == mode:
            report = perf_report(proc.pid, seconds, out_dir)
        else:
            time.sleep(seconds)
        cpu = cpu_seconds(proc.pid) - ready_cpu
        stop = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        err = proc.stderr.read().decode("utf-8", "replace")
        proc.wait(timeout=60)
        exit_s = time.monotonic() - stop
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(out_dir, ignore_errors=True)
    return {"cpu": cpu, "samples": dump_counter(err, "samples collected"),
            "lost": dump_counter(err, "lost"), "ready_wall": ready_wall, "ready_cpu": ready_cpu,
            "exit": exit_s, "report": report}


def run_austin(root, parent, seconds, frequency):
    """Austin's whole run: its CPU and its samples from start to SIGINT (its
    attach costs next to nothing). It writes to a file, so a slow reader
    never holds it up; it flushes its samples when interrupted."""
    interval_us = max(1, int(1e6 / frequency))
    # -C follows the parent's children; -s samples only threads on a CPU.
    cmd = in_root(root, ["austin", "-C", "-s", "-i", str(interval_us), "-p", str(parent)])
    out_dir = tempfile.mkdtemp(prefix="austin-overhead-")
    out_path = os.path.join(out_dir, "austin.out")
    austin = None
    with open(out_path, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
    try:
        austin = after_chroot(proc.pid)
        if austin is None:
            raise RuntimeError("austin did not start")
        time.sleep(seconds)
        cpu = cpu_seconds(austin)
    finally:
        if austin is not None:
            os.kill(austin, signal.SIGINT)  # it writes its samples out and ends
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    with open(out_path, "rb") as f:
        samples = sum(1 for line in f if line.startswith(b"P"))
    shutil.rmtree(out_dir, ignore_errors=True)
    return {"cpu": cpu, "samples": float(samples), "lost": float("nan"), "ready_wall": None,
            "ready_cpu": None, "exit": None, "report": None}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pyperf", default=os.path.normpath(DEFAULT_PYPERF))
    ap.add_argument("--root", default="/var/cache/bcc-pyperf/roots/trixie")
    ap.add_argument("--processes", type=int, default=10)
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--frequency", type=int, default=99)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--perf-record", default="", metavar="MODE")
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    for m in modes:
        if m not in MODES:
            sys.exit("overhead.py: unknown mode %r (modes: %s)" % (m, ", ".join(MODES)))
    python = os.path.join(args.root, "usr/bin/python3.13")
    if not os.access(python, os.X_OK):
        sys.exit("overhead.py: no CPython 3.13 in %s: run scripts/python-roots.sh trixie" % args.root)
    if "austin" in modes and not os.access(os.path.join(args.root, "usr/bin/austin"), os.X_OK):
        sys.exit("overhead.py: no austin in %s: run scripts/python-roots.sh trixie" % args.root)

    proc_mount = ProcMount(args.root)
    spawner = subprocess.Popen(in_root(args.root, ["python3.13", "-c", SPAWNER,
                                                   str(args.processes)]),
                               stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                               preexec_fn=die_with_parent)
    parent = None
    try:
        parent = after_chroot(spawner.pid)
        pids = [int(p) for p in spawner.stdout.readline().split()]
        if len(pids) != args.processes or parent is None:
            sys.exit("overhead.py: the workload did not start")
        time.sleep(1)
        with open("/proc/loadavg") as f:
            load = f.read().split()[0]
        print("%d x CPython 3.13 `while 1: pass` (trixie root), %d Hz, %d s per run, "
              "%d CPUs, load %s" % (args.processes, args.frequency, args.seconds,
                                    os.cpu_count(), load))
        print("%-15s %9s %8s %9s %7s %10s %10s %8s" % (
            "profiler", "µs/sample", "% core", "samples", "lost", "ready s", "ready CPU",
            "exit s"))
        reports = []
        for _ in range(args.repeats):
            for mode in modes:
                if mode == "austin":
                    r = run_austin(args.root, parent, args.seconds, args.frequency)
                else:
                    r = run_pyperf(args.pyperf, mode, pids, args.seconds, args.frequency,
                                   args.perf_record)
                us = 1e6 * r["cpu"] / r["samples"] if r["samples"] else float("nan")
                opt = lambda v, f: (f % v) if v is not None else "-"  # noqa: E731
                print("%-15s %9.1f %8.2f %9d %7s %10s %10s %8s" % (
                    mode, us, 100.0 * r["cpu"] / args.seconds, r["samples"],
                    "-" if r["lost"] != r["lost"] else "%d" % r["lost"],
                    opt(r["ready_wall"], "%.2f"), opt(r["ready_cpu"], "%.2f"),
                    opt(r["exit"], "%.2f")))
                sys.stdout.flush()
                if r["report"]:
                    reports.append((mode, r["report"]))
        for mode, report in reports:
            print("\nperf report of PyPerf (%s), self time by DSO and symbol:\n%s" % (mode, report))
    finally:
        if parent is not None:
            os.kill(parent, signal.SIGTERM)  # it kills its children
        try:
            spawner.wait(timeout=10)
        except subprocess.TimeoutExpired:
            spawner.kill()
            spawner.wait()
        proc_mount.close()


if __name__ == "__main__":
    main()
