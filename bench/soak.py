#!/usr/bin/env python3
"""A soak run of PyPerf: does it stay bounded over a long run on a busy host?

For --minutes (default 10), PyPerf profiles the whole host at --frequency
(default 1000 Hz) with native stacks, gProfiler's protocol (-o, a SIGUSR2 dump
once a minute) and -v 2, while two workloads keep its tables moving:

  churn          tests/cc/workloads/process_churn.py: --churn-rate short-lived
                 Python processes a second (default 5), each 1.2 s long, in turn
                 on every pyenv interpreter installed
  new functions  tests/cc/workloads/new_functions.py: a function no sample has
                 named before, about every millisecond, with a symbols map of
                 --symbols-map-size (default 4096) so that it fills and ages

Once a minute it prints PyPerf's RSS and PSS (/proc/PID/smaps_rollup; PSS
splits each shared page among the processes that map it, so it drops while
another PyPerf maps the same libraries) and open fds (from /proc), the samples
and lost samples of the minute's dump, the symbols maps' fill and the tables'
fill PyPerf logs at -v 2, after a first line with RSS and PSS right after
"Ready to profile". At the end it compares RSS with RSS after the first minute
and exits 1 if it grew by more than 10% (memory, not timing). With --idle it
starts neither workload: PyPerf alone on the host as it is, for what PyPerf
holds when little happens.

  bench/soak.py [--pyperf build/examples/cpp/pyperf/PyPerf] [--minutes 10] [--idle]
      [--frequency 1000] [--churn-rate 5] [--symbols-map-size 4096]
"""
import argparse
import glob
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

import bpf_stats  # bench/ is on sys.path when a script in it runs
from startup_time import terminate

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WORKLOADS = os.path.join(ROOT, "tests", "cc", "workloads")


def pyenv_interpreters():
    root = subprocess.run(["pyenv", "root"], capture_output=True, text=True).stdout.strip()
    root = root or os.path.expanduser("~/.pyenv")
    return sorted(glob.glob(os.path.join(root, "versions", "*", "bin", "python")))


def open_fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def field(line, name):
    m = re.search(r"\b%s: (\d+)" % re.escape(name), line)
    return int(m.group(1)) if m else None


class StderrLog:
    """PyPerf's stderr, in a file; remembers how far it has been read."""

    def __init__(self, path):
        self.path = path
        self.offset = 0
        self.pending = []  # read, not yet looked at

    def new_lines(self):
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        self.offset += end
        return data[:end].decode("utf-8", "replace").splitlines()


def wait_for(log, pred, timeout):
    """The first line from now on that satisfies pred; the lines after it
    stay for the next call."""
    deadline = time.time() + timeout
    seen = []
    while time.time() < deadline:
        log.pending += log.new_lines()
        while log.pending:
            line = log.pending.pop(0)
            seen.append(line)
            if pred(line):
                return line, seen
        time.sleep(0.1)
    return None, seen


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pyperf", default=os.path.join(ROOT, "build", "examples", "cpp",
                                                         "pyperf", "PyPerf"))
    parser.add_argument("--minutes", type=int, default=10)
    parser.add_argument("--frequency", type=int, default=1000)
    parser.add_argument("--churn-rate", type=int, default=5)
    parser.add_argument("--symbols-map-size", type=int, default=4096)
    parser.add_argument("--idle", action="store_true",
                        help="start no workload: PyPerf alone on the host as it is")
    args = parser.parse_args()

    interpreters = pyenv_interpreters()
    modern = [p for p in interpreters if re.search(r"/3\.(1[1-9])\.", p)]
    if not interpreters or not modern:
        sys.exit("soak: needs pyenv's interpreters (scripts/setup.sh installs them)")
    work = tempfile.mkdtemp(prefix="pyperf-soak-")
    err_path = os.path.join(work, "pyperf.stderr")
    children = []
    with open(err_path, "wb") as err:
        pyperf = subprocess.Popen(
            [args.pyperf, "-F", str(args.frequency), "-o", os.path.join(work, "pyperf.col"),
             "-v", "2", "--update-interval", "1",
             "--symbols-map-size", str(args.symbols_map_size)],
            stdout=subprocess.DEVNULL, stderr=err)
    log = StderrLog(err_path)
    try:
        ready, seen = wait_for(log, lambda l: l == "Ready to profile", 120)
        if not ready:
            sys.exit("soak: PyPerf did not get ready:\n" + "\n".join(seen[-20:]))
        ready_rss, ready_pss = bpf_stats.memory_kib(pyperf.pid)
        if args.idle:
            print("soak: PyPerf -F %d for %d min on the host as it is (--idle: no workload); "
                  "%d CPUs, load %.2f at start"
                  % (args.frequency, args.minutes, os.cpu_count(), os.getloadavg()[0]))
        else:
            children.append(subprocess.Popen(
                [modern[0], os.path.join(WORKLOADS, "process_churn.py"), str(args.churn_rate),
                 "0"] + interpreters, stdout=subprocess.DEVNULL))
            children.append(subprocess.Popen(
                [modern[0], os.path.join(WORKLOADS, "new_functions.py")],
                stdout=subprocess.DEVNULL))
            print("soak: PyPerf -F %d for %d min; %d short-lived processes/s on %d interpreters; "
                  "new functions with a symbols map of %d; %d CPUs, load %.2f at start"
                  % (args.frequency, args.minutes, args.churn_rate, len(interpreters),
                     args.symbols_map_size, os.cpu_count(), os.getloadavg()[0]))
        print("soak: after Ready: RSS %d KiB, PSS %d KiB" % (ready_rss, ready_pss))
        header = ("min", "RSS KiB", "PSS KiB", "fds", "samples", "lost", "sym errs",
                  "sym in map", "py_procs", "thr_states", "tracked", "rejected", "native names",
                  "native KiB", "files", "proc states")
        print(" ".join("%11s" % h for h in header))
        rss = []
        start = time.time()
        for minute in range(1, args.minutes + 1):
            time.sleep(max(0, start + 60 * minute - time.time()))
            if pyperf.poll() is not None:
                sys.exit("soak: PyPerf exited with %s" % pyperf.returncode)
            pyperf.send_signal(signal.SIGUSR2)
            dump, seen = wait_for(log, lambda l: l.startswith("PyPerf: samples collected: "), 60)
            tables, more = wait_for(log, lambda l: l.startswith("PyPerf: tables: "), 30)
            seen += more
            if not dump or not tables:
                sys.exit("soak: no dump or tables line after SIGUSR2:\n" + "\n".join(seen[-20:]))
            def t_get(name):
                m = re.search(r"(?:: |, )%s (\d+)" % name, tables)
                return int(m.group(1)) if m else None
            names = re.search(r"native names (\d+) \((\d+) bytes\)", tables)
            rss_now, pss_now = bpf_stats.memory_kib(pyperf.pid)
            rss.append(rss_now)
            row = (minute, rss_now, pss_now, open_fds(pyperf.pid),
                   field(dump, "samples collected"), field(dump, "lost"),
                   field(dump, "symbol errors"), field(dump, "symbols in map"),
                   t_get("py_procs"), t_get("thread_states"),
                   t_get("tracked"), t_get("rejected"),
                   int(names.group(1)) if names else None,
                   int(names.group(2)) // 1024 if names else None,
                   t_get("native files"), t_get("native process states"))
            print(" ".join("%11s" % v for v in row), flush=True)
    finally:
        for child in children:
            child.kill()
            child.wait()
        terminate(pyperf, 60)
    growth = 100.0 * (rss[-1] - rss[0]) / rss[0]
    print("soak: RSS after minute 1 %d KiB, at the end %d KiB (%+.1f%%); PyPerf exit %s; "
          "load %.2f at the end" % (rss[0], rss[-1], growth, pyperf.returncode,
                                    os.getloadavg()[0]))
    if growth > 10.0:
        print("soak: RSS grew by more than 10%")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
