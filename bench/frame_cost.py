#!/usr/bin/env python3
"""PyPerf's whole cost per sample, in-kernel part included, by CPython frame
layout, stack depth and user stack pages (issue 35).

PyPerf's BPF program (on_sample, which tail-calls find_thread_state and
walk_python_stack) runs in the context of the sampled task, so its time is
charged to the profiled process and PyPerf's own CPU time leaves it out. With
kernel.bpf_stats_enabled=1 (set for the run only, then put back; see
bench/bpf_stats.py) the kernel counts it per program, and this reads it from
/proc/PID/fdinfo of PyPerf's BPF program fds.

For each interpreter (--pythons: pyenv's 3.8.18, frame objects; 3.12.1,
interpreter frames), each --pages P and each --depths D, one workload process
(a script written to a temporary directory) calls D - 1 distinct functions, so
that exactly D Python frames are on its stack (its module's frame counts as
one), and spins in the innermost in pure Python (`while 1: pass`). Then each
PyPerf binary in turn (--pyperf, in the order given: before/after side by
side, on the same workload) runs

  PyPerf -F FREQUENCY -p PID --user-stacks-pages P

for --seconds after it prints "Ready to profile", and then SIGTERM, on which
it prints its collapsed stacks (stdout) and its dump line (stderr). One row
per run:

  binary      the --pyperf label
  python      the interpreter's version
  pages       --user-stacks-pages
  depth       D, the workload's Python frames
  frames      the Python frames (`_[p]`) of the workload's stacks in PyPerf's
              output: the count most samples have, to check D
  at %        the share of the workload's samples with that count
  samples     "samples collected" of PyPerf's dump line
  run_cnt     runs of PyPerf's BPF programs in the window. The CPU-clock event
              is host-wide and per CPU, so on_sample runs on every tick of
              every CPU, idle or another process's included, and returns at
              once where no profiled process runs: run_cnt is about CPUs x
              FREQUENCY x seconds, not the samples
  kernel µs   in-kernel µs per sample: the change of run_time_ns summed over
              PyPerf's BPF programs from "Ready to profile" to just before
              SIGTERM (so the start-up check program's runs are left out),
              divided by samples. The runs that return at once are in it:
              it is all the BPF time PyPerf adds, per sample it collects
  own µs      PyPerf's own CPU µs per sample (its process CPU clock, all
              threads), over the same window
  total µs    kernel µs + own µs
  RSS rdy, PSS rdy, RSS end, PSS end
              PyPerf's RSS and PSS in MiB (/proc/PID/smaps_rollup) right after
              "Ready to profile" and just before SIGTERM. Most of the RSS is
              the text of libLLVM and libclang-cpp that BCC's compile touched;
              PSS shares it with any other process mapping them (another
              PyPerf, a test), so PSS moves with what else runs

A few samples are counted outside the window (between the attach and "Ready",
and between the last reading and the stop), a few ms in --seconds. The
in-kernel cost per sample grows as the frequency falls (the caches are colder
at each sample: at 99 Hz about 2.5 times the 499 Hz figure at depth 1), so
compare at one frequency; a loaded machine moves the figures of a few µs
(depth 1, per page) by as much as they are: --repeats N runs each
configuration's binaries N times in turn (A B A B) and the derived figures
take medians.

Then, per binary, interpreter and pages, from the medians of the repeats:

  per frame   the slope between the two deepest --depths (30 and 100): ns of
              in-kernel and of PyPerf's own time per Python frame
  per page    at the shallowest and the deepest depth, between the fewest and most --pages
              (0 and 2): in-kernel ns per page of user stack copied, and the
              change in PyPerf's own µs per sample (native unwinding)

  bench/frame_cost.py [--pyperf LABEL=PATH ...] [--seconds 10] [--frequency 499]
      [--depths 1,30,100] [--pages 0,2] [--pythons 3.8.18,3.12.1] [--repeats 1]
      [--native-frames leaf[,interleaved]]

--native-frames runs each binary in each mode (labels LABEL/MODE when there
are several); interleaved runs skip --pages 0 and unwind the whole copied
stack, so their per-frame slope includes the native frames between Python
frames (one eval-loop call and its C callers per Python call before 3.11).

--pyperf is repeatable (default: current=build/examples/cpp/pyperf/PyPerf).
Interpreters are $(pyenv root)/versions/X/bin/python. Needs root (BPF, the
sysctl). Prints figures; never fails on timing.
"""
import argparse
import collections
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import bpf_stats  # bench/ is on sys.path when a script in it runs
from overhead import READY, die_with_parent, dump_counter, read_lines_until

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, ".."))
DEFAULT_PYPERF = "current=" + os.path.join(REPO, "build", "examples", "cpp", "pyperf", "PyPerf")
SPINNING = "spinning"

def workload_source(depth):
    """A script with depth Python frames on its stack once it spins: its
    module's frame and depth - 1 distinct functions, level_1 calling level_2
    and so on, the last spinning in pure Python. Distinct code objects in a
    file on disk, as a real program's stack has (a recursion of one function,
    or code from -c, whose "<string>" file name has its hash cached where a
    path mostly has none, would measure a kinder case)."""
    spin = ["print(%r, flush=True)" % SPINNING, "while 1:", "    pass"]
    lines = ["import signal, sys",
             # Ctrl-C ends it quietly (no traceback of depth frames amid the table).
             "signal.signal(signal.SIGINT, signal.SIG_DFL)"]
    for level in range(1, depth):
        body = ["level_%d()" % (level + 1)] if level + 1 < depth else spin
        lines += ["def level_%d():" % level] + ["    " + line for line in body]
    lines += ["level_1()"] if depth > 1 else spin
    return "\n".join(lines) + "\n"


def pyenv_root():
    try:
        out = subprocess.run(["pyenv", "root"], capture_output=True, text=True).stdout.strip()
    except OSError:  # no pyenv on PATH
        out = ""
    return out or os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")


def int_list(text):
    return [int(v) for v in text.split(",") if v]


def start_workload(python, depth, directory):
    script = os.path.join(directory, "frame_cost_depth_%d.py" % depth)
    with open(script, "w") as f:
        f.write(workload_source(depth))
    proc = subprocess.Popen([python, script], stdout=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
    if proc.stdout.readline().decode().strip() != SPINNING:
        proc.kill()
        proc.wait()
        raise RuntimeError("the workload on %s did not start" % python)
    return proc


def frames_seen(collapsed, pid):
    """(the Python frame count most of pid's samples have, their share in
    %) from collapsed lines `comm-pid/tid;frame;...;frame count`."""
    counts = collections.Counter()
    tag = "-%d/" % pid
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        if not stack or tag not in frames[0]:
            continue
        counts[sum(1 for f in frames[1:] if f.endswith("_[p]"))] += int(count)
    if not counts:
        return None, 0.0
    frames, n = counts.most_common(1)[0]
    return frames, 100.0 * n / sum(counts.values())


def run_pyperf(pyperf, pid, pages, seconds, frequency, extra):
    cmd = [pyperf, "-F", str(frequency), "-p", str(pid), "--user-stacks-pages", str(pages)] + extra
    # Collapsed stacks go to a file: they come all at once at the stop, and a
    # pipe nobody reads meanwhile could hold PyPerf up.
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
        try:
            lines, ready = read_lines_until(proc.stderr, READY, 120)
            if not ready:
                raise RuntimeError("%s did not print %r; stderr: %s"
                                   % (pyperf, READY, " | ".join(lines[-5:])))
            kernel0, cpu0 = bpf_stats.prog_stats(proc.pid), bpf_stats.cpu_ns(proc.pid)
            mem_ready = bpf_stats.memory_kib(proc.pid)
            time.sleep(seconds)
            kernel = bpf_stats.prog_stats(proc.pid) - kernel0
            cpu = bpf_stats.cpu_ns(proc.pid) - cpu0
            mem_end = bpf_stats.memory_kib(proc.pid)
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        out.seek(0)
        collapsed = out.read().decode("utf-8", "replace")
        frames, share = frames_seen(collapsed, pid)
    err = err.decode("utf-8", "replace")
    samples = dump_counter(err, "samples collected")
    if proc.returncode != 0 or samples != samples:  # NaN: no dump line
        raise RuntimeError("%s exited %d without a dump line: %s"
                           % (pyperf, proc.returncode, err.strip()[-300:]))
    return {"samples": samples, "kernel": kernel, "cpu_ns": cpu,
            "mem_ready": mem_ready, "mem_end": mem_end, "frames": frames, "share": share,
            "collapsed": collapsed}


def per_sample_us(ns, samples):
    return ns / 1e3 / samples if samples else float("nan")


def slope(x0, y0, x1, y1):
    return (y1 - y0) / (x1 - x0)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pyperf", action="append", metavar="LABEL=PATH",
                    help="repeatable; default: %s" % DEFAULT_PYPERF)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--frequency", type=int, default=499)
    ap.add_argument("--depths", type=int_list, default=[1, 30, 100])
    ap.add_argument("--pages", type=int_list, default=[0, 2])
    ap.add_argument("--pythons", default="3.8.18,3.12.1")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--native-frames", default="leaf",
                    help="comma-separated --native-frames modes, each run with every binary")
    args = ap.parse_args()
    modes = [m for m in args.native_frames.split(",") if m]
    if not modes or any(m not in ("leaf", "interleaved") for m in modes):
        sys.exit("frame_cost.py: --native-frames takes leaf and/or interleaved")
    args.binaries = []  # [(label, path)]
    args.extra = {}  # label -> PyPerf's arguments for its mode
    for spec in args.pyperf or [DEFAULT_PYPERF]:
        label, sep, path = spec.partition("=")
        if not sep or not label or not path:
            sys.exit("frame_cost.py: --pyperf wants LABEL=PATH, not %r" % spec)
        if not os.access(path, os.X_OK):
            sys.exit("frame_cost.py: no PyPerf at %s" % path)
        for mode in modes:
            # One mode keeps the binary's label (and argument-free command
            # line, for binaries older than the flag); several name it.
            full = label if len(modes) == 1 else "%s/%s" % (label, mode)
            args.binaries.append((full, path))
            args.extra[full] = [] if mode == "leaf" else ["--native-frames", mode]
    if not args.depths or min(args.depths) < 1:
        sys.exit("frame_cost.py: a depth counts the module's frame: 1 or more")
    args.interpreters = []  # [(version, path)]
    for version in (v for v in args.pythons.split(",") if v):
        path = os.path.join(pyenv_root(), "versions", version, "bin", "python")
        if not os.access(path, os.X_OK):
            sys.exit("frame_cost.py: no CPython %s at %s (pyenv install %s)"
                     % (version, path, version))
        args.interpreters.append((version, path))
    return args


def measure(args, width):
    """Runs every configuration, each binary in turn on one workload, and
    prints a row per run: {(label, version, pages, depth): [(kernel µs, own µs)]}."""
    results = collections.defaultdict(list)
    for version, python in args.interpreters:
        for pages in args.pages:
            for depth in args.depths:
                workload = start_workload(python, depth, args.directory)
                try:
                    for _ in range(args.repeats):
                        for label, pyperf in args.binaries:
                            if pages == 0 and args.extra[label]:
                                continue  # interleaved needs a stack copy
                            r = run_pyperf(pyperf, workload.pid, pages, args.seconds,
                                           args.frequency, args.extra[label])
                            kernel = per_sample_us(r["kernel"].run_time_ns, r["samples"])
                            own = per_sample_us(r["cpu_ns"], r["samples"])
                            results[(label, version, pages, depth)].append((kernel, own))
                            mib = [kib / 1024.0 for kib in r["mem_ready"] + r["mem_end"]]
                            print("%-*s %7s %5d %5d %6s %5.0f %7d %8d %9.2f %7.2f %8.2f "
                                  "%7.1f %7.1f %7.1f %7.1f"
                                  % ((width, label, version, pages, depth,
                                      "-" if r["frames"] is None else r["frames"], r["share"],
                                      r["samples"], r["kernel"].run_cnt, kernel, own,
                                      kernel + own) + tuple(mib)), flush=True)
                finally:
                    workload.kill()
                    workload.wait()
    return results


def print_derived(args, results, width):
    def median(label, version, pages, depth):
        runs = results.get((label, version, pages, depth))
        if not runs:  # a configuration not run (interleaved without a stack copy)
            return float("nan"), float("nan")
        return (statistics.median(k for k, _ in runs), statistics.median(o for _, o in runs))

    depths, pages = sorted(set(args.depths)), sorted(set(args.pages))
    if len(depths) >= 2:
        d0, d1 = depths[-2], depths[-1]
        print("\nper Python frame, slope between %d and %d frames (ns):" % (d0, d1))
        for version, _ in args.interpreters:
            for p in pages:
                for label, _ in args.binaries:
                    k0, o0 = median(label, version, p, d0)
                    k1, o1 = median(label, version, p, d1)
                    print("  %-*s %7s pages %d: in-kernel %6.1f, own %6.1f"
                          % (width, label, version, p, 1e3 * slope(d0, k0, d1, k1),
                             1e3 * slope(d0, o0, d1, o1)))
    if len(pages) < 2:
        return
    # At the shallowest depth the stack may end before the pages do; at the
    # deepest the copy is as long as the pages allow.
    for d in sorted({depths[0], depths[-1]}):
        print("\nper page of user stack, between the fewest and most pages run at depth %d:" % d)
        for version, _ in args.interpreters:
            for label, _ in args.binaries:
                run = [p for p in pages if results.get((label, version, p, d))]
                if len(run) < 2:
                    continue
                p0, p1 = run[0], run[-1]
                k0, o0 = median(label, version, p0, d)
                k1, o1 = median(label, version, p1, d)
                print("  %-*s %7s pages %d-%d: in-kernel %6.1f ns per page; own %+.2f µs"
                      " per sample" % (width, label, version, p0, p1,
                                       1e3 * slope(p0, k0, p1, k1), o1 - o0))

def main():
    args = parse_args()
    print("PyPerf -F %d -p PID --user-stacks-pages P, %g s per run after %r; %d CPUs, load %s"
          % (args.frequency, args.seconds, READY, os.cpu_count(),
             " ".join("%.2f" % l for l in os.getloadavg())))
    for label, path in args.binaries:
        print("  %s = %s" % (label, path))
    width = max([6] + [len(label) for label, _ in args.binaries])
    print("%-*s %7s %5s %5s %6s %5s %7s %8s %9s %7s %8s %7s %7s %7s %7s"
          % (width, "binary", "python", "pages", "depth", "frames", "at %", "samples",
             "run_cnt", "kernel µs", "own µs", "total µs", "RSS rdy", "PSS rdy", "RSS end",
             "PSS end"))
    try:
        with bpf_stats.stats_enabled(), tempfile.TemporaryDirectory() as directory:
            args.directory = directory
            results = measure(args, width)
    except (OSError, RuntimeError, subprocess.TimeoutExpired) as e:
        sys.exit("frame_cost.py: %s" % e)
    except KeyboardInterrupt:
        sys.exit("frame_cost.py: interrupted")
    print("load at the end %s" % " ".join("%.2f" % l for l in os.getloadavg()))
    print_derived(args, results, width)
    return 0


if __name__ == "__main__":
    sys.exit(main())
