#!/usr/bin/env python3
"""Samples lost while a rescan of /proc takes in many new processes.

Two busy `while 1: pass` interpreters are sampled by a whole-host PyPerf at
-F 999 (native frames on: about 6 KiB an event) with a small perf ring; then
N idle interpreters start, and the next rescan (every --update-interval s)
inspects them all. PyPerf is stopped once its -v 4 rescan line shows them
taken in; its dump line gives the samples and the `lost` count. Each PyPerf
binary given runs --runs times, in turn. Prints a table; never fails on
figures.

  bench/rescan_loss.py [--pyperf PATH ...] [--new 150] [--pages 8] [--runs 3]
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_PYPERF = os.path.join(HERE, "..", "build", "examples", "cpp", "pyperf", "PyPerf")
RESCAN = re.compile(rb"rescan: (\d+) processes alive, (\d+) profiled")
DUMP = re.compile(rb"samples collected: (\d+), lost: (\d+)")
GIVE_UP_SECONDS = 120


def python_path():
    root = subprocess.run(["pyenv", "root"], capture_output=True, text=True).stdout.strip()
    path = os.path.join(root, "versions", "3.12.1", "bin", "python")
    return path if os.path.exists(path) else sys.executable


def one_run(pyperf, python, new, pages):
    busy = [subprocess.Popen([python, "-c", "while 1: pass"]) for _ in range(2)]
    err_path = "/tmp/rescan_loss.%d.err" % os.getpid()
    with open(err_path, "wb") as err:
        proc = subprocess.Popen(
            [pyperf, "-F", "999", "-v", "4", "--update-interval", "3",
             "--events-buffer-pages", str(pages), "-o", "/tmp/rescan_loss.%d.out" % os.getpid()],
            stderr=err)
    sleepers = []
    try:
        deadline = time.time() + GIVE_UP_SECONDS
        while b"Ready to profile" not in open(err_path, "rb").read():
            if time.time() > deadline or proc.poll() is not None:
                raise RuntimeError("PyPerf did not start")
            time.sleep(0.05)
        time.sleep(1)
        profiled_before = int(RESCAN.findall(open(err_path, "rb").read())[-1][1])
        sleepers = [subprocess.Popen([python, "-S", "-c", "import time; time.sleep(600)"])
                    for _ in range(new)]
        while True:
            rescans = RESCAN.findall(open(err_path, "rb").read())
            if int(rescans[-1][1]) >= profiled_before + new:
                break
            if time.time() > deadline:
                raise RuntimeError("no rescan took in the new processes")
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        samples = lost = 0
        for s, l in DUMP.findall(open(err_path, "rb").read()):
            samples += int(s)
            lost += int(l)
        return samples, lost
    finally:
        for p in busy + sleepers + [proc]:
            if p.poll() is None:
                p.kill()
                p.wait()
        for suffix in ("err", "out"):
            path = "/tmp/rescan_loss.%d.%s" % (os.getpid(), suffix)
            if os.path.exists(path):
                os.unlink(path)
        out_dir = "/tmp"
        for name in os.listdir(out_dir):
            if name.startswith("rescan_loss.%d.out." % os.getpid()):
                os.unlink(os.path.join(out_dir, name))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pyperf", action="append", help="PyPerf binary (repeatable)")
    parser.add_argument("--new", type=int, default=150)
    parser.add_argument("--pages", type=int, default=8)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    binaries = args.pyperf or [DEFAULT_PYPERF]
    python = python_path()
    print("%d new interpreters (%s) beside 2 busy ones, -F 999, --events-buffer-pages %d, "
          "load %.2f" % (args.new, python, args.pages, os.getloadavg()[0]))
    print("%-60s %4s %9s %7s" % ("PyPerf", "run", "samples", "lost"))
    for run in range(args.runs):
        for binary in binaries:
            samples, lost = one_run(binary, python, args.new, args.pages)
            print("%-60s %4d %9d %7d" % (binary, run + 1, samples, lost), flush=True)


if __name__ == "__main__":
    main()
