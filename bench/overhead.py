#!/usr/bin/env python3
"""PyPerf's cost per sample beside another profiler's, on one workload, in one run.

The workload is N CPython processes running `while 1: pass`, started in a
Debian root that the tests build (scripts/python-roots.sh), in the host's pid
namespace. --python chooses the interpreter, its root and the peer profiler:

  --python 3.13  (the default) Debian trixie's python3.13, beside Austin 3.7
                 (Debian's `austin`, in the same root)
  --python 3.15  Debian sid's python3.15, beside CPython 3.15's own sampler
                 `python3.15 -m profiling.sampling` ("Tachyon"); Austin 3.7
                 reads no 3.15 process (it finds the version, then no samples)

One after another, each profiler samples the same processes for D seconds at
F Hz:

  python-only        PyPerf --user-stacks-pages 0
  native-cache       PyPerf with native stacks, symbol cache on (the default)
  native-nocache     PyPerf with native stacks, --native-cache off
  austin             (3.13) Austin -C -s: Python stacks only, from user space,
                     one Austin following the workload's parent and its children
  profiling.sampling (3.15) Tachyon: Python stacks only, from user space. It
                     attaches to one process, so N of them run at once, one per
                     workload process, each chrooted in the root:
                       python3.15 -m profiling.sampling attach -r F -a
                         --mode cpu --collapsed -o FILE PID
                     (--mode cpu records a thread only in state R, running or
                     runnable, as Austin's -s does: the nearest either comes to
                     PyPerf, which samples CPU time; -a all threads, as the
                     others). Their CPU and samples are summed.

and the table gives, per profiler: its CPU time (its process CPU clock: every
thread's run time, in ns) per sample in microseconds, counted from "Ready to
profile" (PyPerf) or over its whole run, start-up included (Austin and
profiling.sampling, read just before SIGINT); for PyPerf, the µs per sample its
BPF programs take in the kernel over the same window ("kernel µs": they run in
the sampled task's context, so that time is charged to the processes profiled,
not to PyPerf; read with kernel.bpf_stats_enabled=1, set for PyPerf's runs
only, see bench/bpf_stats.py; it includes the program's runs on the host's
other CPU ticks, idle or another process's, which return at once) and the sum
of both ("total µs"); the own CPU as a share of one core; samples taken
(PyPerf's count; Austin's stack lines; the counts in profiling.sampling's
collapsed files) and lost (PyPerf's dropped events; profiling.sampling's reads
that recorded no stack: its "Captured" count less its recorded ones); for
PyPerf the wall and CPU time to "Ready to profile", and for profiling.sampling
those of the same N commands run at once with -d 0 beforehand (start, attach,
write an empty profile, exit: wall until the last ends, CPU summed); and the
time from the stop signal to the last exit (PyPerf, profiling.sampling); and
PyPerf's RSS and PSS in MiB (/proc/PID/smaps_rollup) right after "Ready to
profile" ("RSS rdy", "PSS rdy") and at the end, just before the stop signal
("RSS end", "PSS end"). Columns that do not apply to a profiler show "-".
Prints figures; never fails on timing.

PyPerf samples CPU time (F per CPU-second the workload uses); Austin and
profiling.sampling read every thread in state R each interval, so N busy
processes give up to N x F x D samples however few the CPUs: compare cost per
sample, not sample counts.

  bench/overhead.py [--pyperf build/examples/cpp/pyperf/PyPerf] [--python 3.13|3.15]
      [--root DIR] [--processes 10] [--seconds 30] [--frequency 99]
      [--modes python-only,native-cache,native-nocache,austin|profiling.sampling]
      [--repeats 1] [--perf-record MODE]

--root overrides the root --python chooses (/var/cache/bcc-pyperf/roots/SUITE).
--perf-record MODE records PyPerf's own CPU in that mode with `perf record -g`
(Debian's linux-perf) and prints the top of `perf report` after the table.
"""
import argparse
import ctypes
import os
import re
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import bpf_stats  # bench/ is on sys.path when a script in it runs

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, ".."))
DEFAULT_PYPERF = os.path.join(REPO, "build", "examples", "cpp", "pyperf", "PyPerf")
READY = "Ready to profile"
PYPERF_MODES = ("python-only", "native-cache", "native-nocache")
TACHYON = "profiling.sampling"
ROOTS = "/var/cache/bcc-pyperf/roots"
# --python: the root (a suite of scripts/python-roots.sh) and the peer profiler
# that reads that interpreter's processes.
PYTHONS = {"3.13": {"suite": "trixie", "peer": "austin"},
           "3.15": {"suite": "sid", "peer": TACHYON}}
MODES = PYPERF_MODES + tuple(p["peer"] for p in PYTHONS.values())

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


def stops_on_sigint():
    """Child setup for a profiler that SIGINT stops (it writes its samples out
    and ends): as die_with_parent, and SIGINT handled by default even where the
    bench was started with it ignored (a background job of a shell without job
    control), which the child would inherit."""
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def cpu_seconds(pid):
    # To the ns: utime + stime count whole clock ticks (10 ms), as much as a
    # short python-only run of PyPerf takes in all.
    return bpf_stats.cpu_ns(pid) / 1e9


def per_sample_us(seconds, samples):
    return 1e6 * seconds / samples if samples else float("nan")


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
        kernel0 = bpf_stats.prog_stats(proc.pid)
        mem_ready = bpf_stats.memory_kib(proc.pid)
        if record == mode:
            report = perf_report(proc.pid, seconds, out_dir)
        else:
            time.sleep(seconds)
        cpu = cpu_seconds(proc.pid) - ready_cpu
        kernel_ns = (bpf_stats.prog_stats(proc.pid) - kernel0).run_time_ns
        mem_end = bpf_stats.memory_kib(proc.pid)
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
            "exit": exit_s, "report": report, "kernel_s": kernel_ns / 1e9,
            "mem": mem_ready + mem_end}


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
                                stdin=subprocess.DEVNULL, preexec_fn=stops_on_sigint)
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
            "ready_cpu": None, "exit": None, "report": None, "kernel_s": None, "mem": None}


def stop_all(procs, sig, seconds):
    """Send sig to each process still running, wait up to `seconds` in all for
    them to end, SIGKILL and reap the rest."""
    for proc in procs:
        if proc.poll() is None:
            try:
                proc.send_signal(sig)
            except OSError:
                pass
    deadline = time.monotonic() + seconds
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_tachyon(root, python, pids, seconds, frequency):
    """CPython's own sampler, one `profiling.sampling attach` per workload
    process, all at once, chrooted in the root so that the paths in the
    processes' maps are its own. First the same commands with -d 0 (start,
    attach, an empty profile, exit) for its start-up figures; then the run:
    CPU summed over each one's whole run up to SIGINT, on which it stops
    sampling and writes its collapsed profile (the samples, summed)."""
    out_dir = tempfile.mkdtemp(prefix="tachyon-overhead-", dir=os.path.join(root, "tmp"))
    out_in_root = "/" + os.path.relpath(out_dir, root)

    def command(pid, name, extra):
        return in_root(root, [python, "-m", "profiling.sampling", "attach",
                              "-r", str(frequency), "-a", "--mode", "cpu", "--collapsed",
                              "-o", "%s/%s.%d.col" % (out_in_root, name, pid)]
                       + extra + [str(pid)])

    def start(name, extra):
        procs = []
        for pid in pids:
            with open(os.path.join(out_dir, "%s.%d.log" % (name, pid)), "wb") as log:
                procs.append(subprocess.Popen(command(pid, name, extra), stdout=log,
                                              stderr=subprocess.STDOUT,
                                              stdin=subprocess.DEVNULL,
                                              preexec_fn=stops_on_sigint))
        return procs

    def log(name, pid):
        with open(os.path.join(out_dir, "%s.%d.log" % (name, pid)), "rb") as f:
            return f.read().decode("utf-8", "replace").strip()

    procs = []
    try:
        # Start-up: chroot execs python, so these are the children that the
        # RUSAGE_CHILDREN difference counts, and nothing else ends meanwhile.
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        procs = start("ready", ["-d", "0"])
        for proc in procs:
            proc.wait(timeout=120)
        ready_wall = time.monotonic() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        ready_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        for pid, proc in zip(pids, procs):
            if proc.returncode != 0:
                raise RuntimeError("profiling.sampling -d 0 on %d failed: %s"
                                   % (pid, log("ready", pid).replace("\n", " | ")))

        procs = start("run", [])
        tachyons = [after_chroot(proc.pid) for proc in procs]
        if None in tachyons:
            raise RuntimeError("profiling.sampling did not start")
        time.sleep(seconds)
        cpu = sum(cpu_seconds(t) for t in tachyons)
        stop = time.monotonic()
        stop_all(procs, signal.SIGINT, 60)  # each writes its profile and ends
        exit_s = time.monotonic() - stop

        samples = captured = 0
        for pid in pids:
            text = log("run", pid)
            found = re.search(r"Captured ([0-9.,]+) samples?", text)
            path = os.path.join(out_dir, "run.%d.col" % pid)
            if not found or not os.path.exists(path):
                raise RuntimeError("profiling.sampling on %d wrote no profile: %s"
                                   % (pid, text.replace("\n", " | ")))
            captured += int(re.sub(r"[^0-9]", "", found.group(1)))
            with open(path, "rb") as f:  # "tid:T;frame;frame COUNT" lines
                samples += sum(int(line.rsplit(b" ", 1)[1]) for line in f if line.strip())
    finally:
        stop_all(procs, signal.SIGINT, 30)
        shutil.rmtree(out_dir, ignore_errors=True)
    return {"cpu": cpu, "samples": float(samples), "lost": float(captured - samples),
            "ready_wall": ready_wall, "ready_cpu": ready_cpu, "exit": exit_s, "report": None,
            "kernel_s": None, "mem": None}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pyperf", default=os.path.normpath(DEFAULT_PYPERF))
    ap.add_argument("--python", choices=sorted(PYTHONS), default="3.13")
    ap.add_argument("--root", help="default: %s/SUITE, SUITE as --python chooses" % ROOTS)
    ap.add_argument("--processes", type=int, default=10)
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--frequency", type=int, default=99)
    ap.add_argument("--modes", help="default: PyPerf's modes and --python's peer")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--perf-record", default="", metavar="MODE")
    args = ap.parse_args()
    suite, peer = PYTHONS[args.python]["suite"], PYTHONS[args.python]["peer"]
    root = args.root or os.path.join(ROOTS, suite)
    modes = [m for m in (args.modes or ",".join(PYPERF_MODES + (peer,))).split(",") if m]
    for m in modes:
        if m not in MODES:
            sys.exit("overhead.py: unknown mode %r (modes: %s)" % (m, ", ".join(MODES)))
        if m not in PYPERF_MODES and m != peer:
            sys.exit("overhead.py: %s reads no CPython %s process; it runs with --python %s"
                     % (m, args.python,
                        " or ".join(v for v in sorted(PYTHONS) if PYTHONS[v]["peer"] == m)))
    python = "python" + args.python
    if not os.access(os.path.join(root, "usr/bin", python), os.X_OK):
        sys.exit("overhead.py: no CPython %s in %s: run scripts/python-roots.sh %s"
                 % (args.python, root, suite))
    if "austin" in modes and not os.access(os.path.join(root, "usr/bin/austin"), os.X_OK):
        sys.exit("overhead.py: no austin in %s: run scripts/python-roots.sh %s" % (root, suite))
    if TACHYON in modes and not os.path.isdir(
            os.path.join(root, "usr/lib", python, "profiling/sampling")):
        sys.exit("overhead.py: no profiling.sampling in %s's %s" % (root, python))

    proc_mount = ProcMount(root)
    spawner = subprocess.Popen(in_root(root, [python, "-c", SPAWNER, str(args.processes)]),
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
        # Austin 3.7 is the peer for 3.13 only: say so where it is missing.
        where = os.path.basename(os.path.normpath(root)) + " root"
        if peer != "austin":
            where += "; Austin 3.7 reads no %s" % args.python
        print("%d x CPython %s `while 1: pass` (%s), %d Hz, %d s per run, "
              "%d CPUs, load %s" % (args.processes, args.python, where, args.frequency,
                                    args.seconds, os.cpu_count(), load))
        if TACHYON in modes:
            print("%s: %d at once, one per process, CPU and samples summed; "
                  "ready: the same with -d 0" % (TACHYON, args.processes))
        width = max([15] + [len(m) for m in modes])
        print("%-*s %9s %9s %8s %8s %9s %7s %10s %10s %8s %7s %7s %7s %7s" % (
            width, "profiler", "µs/sample", "kernel µs", "total µs", "% core", "samples", "lost",
            "ready s", "ready CPU", "exit s", "RSS rdy", "PSS rdy", "RSS end", "PSS end"))
        reports = []
        for _ in range(args.repeats):
            for mode in modes:
                if mode == "austin":
                    r = run_austin(root, parent, args.seconds, args.frequency)
                elif mode == TACHYON:
                    r = run_tachyon(root, python, pids, args.seconds, args.frequency)
                else:
                    with bpf_stats.stats_enabled():
                        r = run_pyperf(args.pyperf, mode, pids, args.seconds, args.frequency,
                                       args.perf_record)
                opt = lambda v, f: (f % v) if v is not None else "-"  # noqa: E731
                us = per_sample_us(r["cpu"], r["samples"])
                kernel = total = "-"
                if r["kernel_s"] is not None:
                    kernel_us = per_sample_us(r["kernel_s"], r["samples"])
                    kernel, total = "%.1f" % kernel_us, "%.1f" % (us + kernel_us)
                mib = ["%.1f" % (kib / 1024.0) for kib in r["mem"]] if r["mem"] else ["-"] * 4
                print("%-*s %9.1f %9s %8s %8.2f %9d %7s %10s %10s %8s %7s %7s %7s %7s" % (
                    width, mode, us, kernel, total, 100.0 * r["cpu"] / args.seconds,
                    r["samples"], "-" if r["lost"] != r["lost"] else "%d" % r["lost"],
                    opt(r["ready_wall"], "%.2f"), opt(r["ready_cpu"], "%.2f"),
                    opt(r["exit"], "%.2f"), *mib))
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
