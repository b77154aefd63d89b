#!/usr/bin/env python3
"""gProfiler's reference overhead method, end to end.

Starts N Python processes each running `while 1: pass`, then runs PyPerf with
native stacks on for D seconds at each frequency, with and without the native
symbol cache, alternating (on, off, on, off ...), and reports for every run:
PyPerf's own CPU seconds (utime + stime from /proc/PID/stat) per 1000 samples
and as a share of one core, samples collected and lost, the native cache's hit
rate, and PyPerf's peak RSS (VmHWM). Prints figures; never fails on timing.

  bench/reference_overhead.py --pyperf build/examples/cpp/pyperf/PyPerf \
      [--processes 10] [--seconds 60] [--frequencies 99,1000] [--repeats 1]
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[0] is the state (field 3); utime, stime are fields 14, 15.
    return (int(fields[11]) + int(fields[12])) / float(CLK_TCK)


def peak_rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def run_once(pyperf, pids, seconds, frequency, cache, pages, buffer_pages):
    out_dir = tempfile.mkdtemp(prefix="pyperf-bench-")
    # gProfiler's own flags (--events-buffer-pages 256 --symbols-map-size 131072).
    cmd = [pyperf, "-F", str(frequency), "--user-stacks-pages", str(pages),
           "--events-buffer-pages", str(buffer_pages), "--symbols-map-size", "131072",
           "--native-cache", "on" if cache else "off", "-o", os.path.join(out_dir, "out.col")]
    for pid in pids:
        cmd += ["-p", str(pid)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 30
        line = ""
        while time.time() < deadline:
            line = proc.stderr.readline()
            if "Ready to profile" in line or not line:
                break
        start_cpu = cpu_seconds(proc.pid)
        time.sleep(seconds)
        end_cpu = cpu_seconds(proc.pid)
        rss = peak_rss_kib(proc.pid)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stats = {}
    for key in ("samples collected", "lost", "hit rate", "native stack errors"):
        m = re.findall(re.escape(key) + r": ([0-9.]+)", err)
        stats[key] = float(m[-1]) if m else float("nan")
    for name in os.listdir(out_dir):
        os.unlink(os.path.join(out_dir, name))
    os.rmdir(out_dir)
    cpu = end_cpu - start_cpu
    samples = stats["samples collected"]
    return {
        "cpu_s": cpu,
        "core_pct": 100.0 * cpu / seconds,
        "cpu_ms_per_1000": 1000.0 * cpu / samples * 1000.0 if samples else float("nan"),
        "samples": samples,
        "lost": stats["lost"],
        "hit_rate": stats["hit rate"],
        "native_errors": stats["native stack errors"],
        "rss_mib": rss / 1024.0,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pyperf", required=True)
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--processes", type=int, default=10)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--frequencies", default="99,1000")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--user-stacks-pages", type=int, default=2)
    ap.add_argument("--events-buffer-pages", type=int, default=256)
    args = ap.parse_args()

    workers = [subprocess.Popen([args.python, "-c", "while 1: pass"]) for _ in range(args.processes)]
    try:
        time.sleep(1)
        pids = [w.pid for w in workers]
        print("%d x `%s -c 'while 1: pass'`, %d s per run, native stacks on (%d pages), "
              "%d perf buffer pages per CPU" % (args.processes, args.python, args.seconds,
                                                 args.user_stacks_pages, args.events_buffer_pages))
        print("%-6s %-6s %9s %8s %14s %9s %7s %9s %8s %8s" % (
            "Hz", "cache", "CPU s", "% core", "CPU ms/1000 s", "samples", "lost", "hit rate",
            "errors", "RSS MiB"))
        for freq in [int(f) for f in args.frequencies.split(",")]:
            for _ in range(args.repeats):
                for cache in (True, False):
                    r = run_once(args.pyperf, pids, args.seconds, freq, cache, args.user_stacks_pages,
                                 args.events_buffer_pages)
                    print("%-6d %-6s %9.2f %8.2f %14.2f %9d %7d %9s %8d %8.1f" % (
                        freq, "on" if cache else "off", r["cpu_s"], r["core_pct"],
                        r["cpu_ms_per_1000"], r["samples"], r["lost"],
                        "%.4f" % r["hit_rate"] if r["hit_rate"] == r["hit_rate"] else "-",
                        r["native_errors"], r["rss_mib"]))
                    sys.stdout.flush()
    finally:
        for w in workers:
            w.kill()
            w.wait()


if __name__ == "__main__":
    main()
