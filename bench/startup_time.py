#!/usr/bin/env python3
"""PyPerf's start-up time, idle and with every core busy.

gProfiler gives PyPerf 10 s from exec to the output file (which PyPerf creates
right before it prints "Ready to profile"). This measures, per run, the wall
time from exec to that stderr line, PyPerf's own CPU time (utime + stime
from /proc/PID/stat) at that moment and how long it was runnable but waiting
for a CPU (/proc/PID/task/*/schedstat; the rest of the wall time it was
blocked), first on the machine as it is ("idle"),
then with N busy `while 1: pass` Python processes beside it ("loaded"; they
are Python on purpose: gProfiler profiles every Python process, so PyPerf
inspects them at start-up). PyPerf runs with gProfiler's command line,
kernel offsets included (read from BTF by tests/gprofiler/pyperf_harness.py,
as gProfiler passes them). Prints a table (median and max per mode); never
fails on timing.

  bench/startup_time.py [--pyperf build/examples/cpp/pyperf/PyPerf] [--runs 5] [--busy 10]
      [--modes idle,loaded] [--verbose] [--no-offsets]

--verbose runs PyPerf with -v 4 and prints, per run, the seconds since exec
at which each of PyPerf's start-up log lines arrived.
"""
import argparse
import ctypes
import os
import selectors
import signal
import statistics
import subprocess
import sys
import tempfile
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "gprofiler"))
from pyperf_harness import kernel_task_offsets  # noqa: E402
DEFAULT_PYPERF = os.path.join(HERE, "..", "build", "examples", "cpp", "pyperf", "PyPerf")
READY = b"Ready to profile"
GIVE_UP_SECONDS = 120  # a run that takes longer is reported as such, not waited for


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[0] is field 3 (state); utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / float(CLK_TCK)


def sched_seconds(pid):
    """(seconds on a CPU, seconds runnable but waiting for one) of all of
    pid's threads, from /proc/PID/task/*/schedstat."""
    on_cpu = waiting = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                run_ns, wait_ns, _ = f.read().split()
        except (OSError, ValueError):
            continue
        on_cpu += int(run_ns)
        waiting += int(wait_ns)
    return on_cpu / 1e9, waiting / 1e9


def loadavg():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def die_with_parent():
    """Child setup: SIGKILL when the bench dies, so no busy loop outlives it."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def start_busy(n):
    return [subprocess.Popen([sys.executable, "-c", "while 1: pass"], stdin=subprocess.DEVNULL,
                             preexec_fn=die_with_parent)
            for _ in range(n)]


def terminate(process, timeout):
    """SIGTERM, and SIGKILL if it has not exited `timeout` seconds later;
    reaped either way (communicate(), so that a full pipe cannot stall it)."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()


def stop_all(processes):
    for p in processes:
        if p.poll() is None:
            p.kill()
    for p in processes:
        p.wait()


def run_once(pyperf, offsets, verbose):
    """(wall seconds to READY, CPU seconds at READY, seconds waiting for a CPU
    at READY, [(seconds, log line)]), or Nones and the lines when PyPerf ended
    or gave up first."""
    out_dir = tempfile.mkdtemp(prefix="pyperf-startup-")
    output = os.path.join(out_dir, "pyperf.col")
    cmd = [pyperf]
    if offsets:
        cmd += ["--fs-offset", str(offsets[0]), "--stack-offset", str(offsets[1])]
    cmd += ["--output", output, "-F", "1000", "--events-buffer-pages", "256",
            "--symbols-map-size", "131072"]
    if verbose:
        cmd += ["-v", "4"]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    lines, buf = [], b""
    wall = cpu = waited = None
    sel = selectors.DefaultSelector()
    sel.register(proc.stderr, selectors.EVENT_READ)
    try:
        while wall is None and time.monotonic() - started < GIVE_UP_SECONDS:
            if not sel.select(timeout=1.0):
                continue
            data = os.read(proc.stderr.fileno(), 65536)
            now = time.monotonic() - started
            if not data:
                break
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                lines.append((now, line.decode("utf-8", "replace")))
                if line.startswith(READY) and wall is None:
                    wall = now
                    cpu = cpu_seconds(proc.pid)
                    waited = sched_seconds(proc.pid)[1]
    finally:
        sel.close()
        terminate(proc, 30)
        for name in os.listdir(out_dir):
            os.unlink(os.path.join(out_dir, name))
        os.rmdir(out_dir)
    return wall, cpu, waited, lines


def summary(values):
    values = [v for v in values if v is not None]
    if not values:
        return "-", "-"
    return "%.2f" % statistics.median(values), "%.2f" % max(values)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pyperf", default=os.path.normpath(DEFAULT_PYPERF))
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--busy", type=int, default=10, help="busy processes in the loaded mode")
    parser.add_argument("--modes", default="idle,loaded")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--no-offsets", action="store_true",
                        help="let PyPerf read the task_struct offsets from BTF itself")
    args = parser.parse_args()
    offsets = None
    if not args.no_offsets:
        try:
            offsets = kernel_task_offsets()
        except (OSError, ValueError) as e:
            print("no task_struct offsets from BTF (%s): PyPerf finds them itself" % e)

    rows = []
    for mode in args.modes.split(","):
        busy = start_busy(args.busy) if mode == "loaded" else []
        try:
            time.sleep(1.0 if busy else 0)  # let the load settle
            walls, cpus, waits, failed = [], [], [], 0
            load_seen = loadavg()
            for i in range(args.runs):
                wall, cpu, waited, lines = run_once(args.pyperf, offsets, args.verbose)
                if wall is None:
                    failed += 1
                    print("%s run %d: no \"Ready to profile\"; stderr:\n  %s"
                          % (mode, i + 1, "\n  ".join(l for _, l in lines[-10:])))
                else:
                    print("%s run %d: ready after %.2f s wall, %.2f s CPU, %.2f s waiting for a CPU"
                          % (mode, i + 1, wall, cpu, waited))
                if args.verbose:
                    for t, line in lines:
                        if not line.startswith("PyPerf: round "):
                            print("  %6.2f %s" % (t, line[:150]))
                walls.append(wall)
                cpus.append(cpu)
                waits.append(waited)
            rows.append((mode, len(busy), load_seen, args.runs - failed, summary(walls), summary(cpus),
                         summary(waits)))
        finally:
            stop_all(busy)

    print()
    print("%d CPUs; PyPerf %s" % (os.cpu_count(), args.pyperf))
    print("%-7s %5s %8s %5s | %-17s | %-17s | %-17s" % (
        "mode", "busy", "loadavg", "ready", "wall s (med/max)", "CPU s (med/max)",
        "runq wait s (m/M)"))
    for mode, busy, load, ok, (wmed, wmax), (cmed, cmax), (qmed, qmax) in rows:
        print("%-7s %5d %8s %5d | %7s / %7s | %7s / %7s | %7s / %7s"
              % (mode, busy, load, ok, wmed, wmax, cmed, cmax, qmed, qmax))
    return 0


if __name__ == "__main__":
    sys.exit(main())
