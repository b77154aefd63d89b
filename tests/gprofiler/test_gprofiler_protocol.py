#!/usr/bin/python3
"""gProfiler drop-in tests: PyPerf driven by pyperf_harness exactly as
gProfiler 1.50's PythonEbpfProfiler drives it, against a workload with a
known call tree (tests/cc/workloads/calltree.py).

Usage: test_gprofiler_protocol.py --pyperf PATH [--python SPEC] CASE
  SPEC is an interpreter path or "pyenv:X.Y" (the newest X.Y.* under
  $PYENV_ROOT, default ~/.pyenv). CASE is one of the functions named case_*
  below, without the prefix and with '-' for '_'.

Exit status: 0 passed, 1 failed, 77 skipped (a missing interpreter or
capability); with PYPERF_TEST_STRICT=1 a skip is a failure.

gProfiler behaviour -> case:
  start-up check, with and without --fs-offset/--stack-offset  startup
  continuous run, 10 s start wait, SIGUSR2 cycles, keep the newest
    file and delete the rest, read and always unlink, parse and
    count bad lines, non-blocking stdout/stderr reads, -v 4        cycles
  native frames and --insert-dso-name                             native
  100 SIGUSR2 10 ms apart                                         signal-storm
  dump timeout -> SIGTERM, reap, start again (PyPerf SIGKILLed)    restart
  the harness itself: parsing rules, "PyPerf failed to start",
    restart after a dump timeout (with a fake PyPerf)              harness-selftest
"""
import argparse
import contextlib
import ctypes
import glob
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))  # tests/, for script_support
import pyperf_harness as gp  # noqa: E402
import script_support  # noqa: E402
from script_support import Failure, Skip, check, log  # noqa: E402

WORKLOAD = os.path.normpath(os.path.join(HERE, "..", "cc", "workloads", "calltree.py"))
CYCLE_SECONDS = 1.0  # gProfiler's interval is 60 s; 1 s keeps the suite short
SYSCALL_ENTRY = re.compile(r"^(entry_SYSCALL_64\w*|do_syscall_64)_\[k\]$")
DSO_IN_NATIVE_FRAME = re.compile(r" \(/[^()]*\)_\[pn\]$")


# --- requirements -------------------------------------------------------------

def require_bpf_capabilities():
    """Root, or CAP_BPF + CAP_PERFMON, or CAP_SYS_ADMIN, as PyPerf needs."""
    if os.geteuid() == 0:
        return
    with open("/proc/self/status") as f:
        caps = next(int(line.split()[1], 16) for line in f if line.startswith("CapEff:"))
    has = lambda bit: bool(caps & (1 << bit))  # noqa: E731
    if not (has(21) or (has(38) and has(39))):
        raise Skip("needs root or CAP_BPF+CAP_PERFMON (or CAP_SYS_ADMIN) to load BPF programs")


def require_pyperf(path):
    # CTest passes the PyPerf target's file: its absence is a broken build, not a skip.
    check(path and os.access(path, os.X_OK), "PyPerf binary not found at %r (build the PyPerf target)" % path)


def pyenv_root():
    if os.environ.get("PYENV_ROOT"):
        return os.environ["PYENV_ROOT"]
    return os.path.join(os.environ.get("HOME") or "/root", ".pyenv")


def resolve_python(spec):
    """An interpreter path from a path or "pyenv:X.Y"; Skip if absent."""
    if spec.startswith("pyenv:"):
        minor = spec[len("pyenv:"):]
        versions = os.path.join(pyenv_root(), "versions")
        found = []
        for name in os.listdir(versions) if os.path.isdir(versions) else []:
            if re.match(r"^%s\.\d+$" % re.escape(minor), name):
                path = os.path.join(versions, name, "bin", "python")
                if os.access(path, os.X_OK):
                    found.append((tuple(int(x) for x in name.split(".")), path))
        if not found:
            raise Skip("no pyenv interpreter %s.* under %s" % (minor, versions))
        return max(found)[1]
    if not os.access(spec, os.X_OK):
        raise Skip("interpreter %s not found" % spec)
    return spec


# --- the workload and the frames it must show ----------------------------------

PROBE = r"""
import json, sys, threading
sys.path.insert(0, sys.argv[1])
import calltree as m
def code(f):
    return getattr(f, "__func__", f).__code__
def frame(f, cls=""):
    c = code(f)
    return [c.co_filename, cls, c.co_name, c.co_firstlineno]
with open(sys.argv[2]) as src:
    module_code = compile(src.read(), sys.argv[2], "exec")
T = threading.Thread
bootstrap = getattr(T, "_bootstrap", None) or getattr(T, "_Thread__bootstrap")
bootstrap_inner = getattr(T, "_bootstrap_inner", None) or getattr(T, "_Thread__bootstrap_inner")
thread_root = [frame(bootstrap, "Thread"), frame(bootstrap_inner, "Thread"), frame(T.run, "Thread")]
sys.stdout.write(json.dumps({
    "version": list(sys.version_info[:2]),
    "main": [[module_code.co_filename, "", module_code.co_name, module_code.co_firstlineno],
             frame(m.main_busy), frame(m.main_leaf)],
    "worker-method": thread_root + [frame(m.Worker.run, "Worker"), frame(m.Worker.spin, "Worker")],
    "worker-cls": thread_root + [frame(m.Worker.class_spin, "Worker")],
    "syscall-loop": thread_root + [frame(m.syscall_loop)],
    "deep-recursion": [frame(m.recurse), frame(m.deep_leaf)],
}))
"""


def module_name(path):
    """The module part of a Python frame, by the rule in README.md: the file
    path without any lib/pythonX.Y/, site-packages/ or dist-packages/ prefix
    and without .py, '/' turned into '.'."""
    if path.startswith("<") and path.endswith(">"):
        return path[len("<frozen "):-1] if path.startswith("<frozen ") else path
    end = 0
    for marker in ("site-packages/", "dist-packages/"):
        i = path.rfind(marker)
        if i >= 0:
            end = max(end, i + len(marker))
    for m in re.finditer(r"lib(?:64)?/python\d+(?:\.\d+)?t?/", path):
        end = max(end, m.end())
    rest = path[end:]
    while rest.startswith("/") or rest.startswith("./"):
        rest = rest[1:] if rest.startswith("/") else rest[2:]
    if rest.endswith(".py"):
        rest = rest[:-3]
    module = rest.replace("/", ".")
    if module.endswith(".__init__"):
        module = module[:-len(".__init__")]
    return module


def python_frame(filename, cls, function, line):
    module = module_name(filename)
    text = "%s%s%s (%s:%d)_[p]" % (module + "." if module else "", cls + "." if cls else "",
                                   function, filename, line)
    return re.sub(r"[;\r\n]", "_", text)


def die_with_parent():
    """Child setup: SIGKILL when the test dies, so that a test killed by a
    CTest timeout leaves no busy workload behind."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Workload(object):
    """calltree.py running under one interpreter, and the Python frames each
    of its threads must show, root to leaf."""

    def __init__(self, python):
        self.python = python
        self.process = None
        out = subprocess.check_output([python, "-c", PROBE, os.path.dirname(WORKLOAD), WORKLOAD],
                                      stderr=subprocess.STDOUT, timeout=60)
        probe = json.loads(out.decode())
        self.version = tuple(probe.pop("version"))
        self.expected = {name: [python_frame(*f) for f in frames] for name, frames in probe.items()}
        self.eval_function = "PyEval_EvalFrameEx" if self.version[0] == 2 else "_PyEval_EvalFrameDefault"

    def __enter__(self):
        self.process = subprocess.Popen([self.python, WORKLOAD], stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        preexec_fn=die_with_parent)
        # calltree.py prints "ready" once every thread runs.
        ready, _, _ = select.select([self.process.stdout], [], [], 30)
        line = self.process.stdout.readline() if ready else b"(nothing within 30 s)"
        if line.strip() != b"ready":
            self.__exit__(None, None, None)
            raise Failure("workload %s %s did not start: %r" % (self.python, WORKLOAD, line))
        self.pid = self.process.pid
        return self

    def cpu_ticks(self):
        """CPU time the workload has used (utime + stime), in clock ticks."""
        with open("/proc/%d/stat" % self.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()  # from field 3, the state
        return int(fields[11]) + int(fields[12])

    def wait_cpu(self, seconds, timeout=60):
        """Waits until the workload has used `seconds` more of CPU time, so a
        cycle has samples to hold however busy the machine is."""
        target = self.cpu_ticks() + seconds * os.sysconf("SC_CLK_TCK")
        try:
            gp.wait_event(timeout, lambda: self.cpu_ticks() >= target, interval=0.02)
        except TimeoutError:
            raise Failure("the workload did not run %.1f CPU seconds within %d s"
                          % (seconds, timeout))

    def __exit__(self, *exc):
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait()
            self.process.stdout.close()
            self.process = None

    def libpython(self):
        """The libpython*.so the workload maps, or None (interpreter in the
        executable)."""
        with open("/proc/%d/maps" % self.pid) as f:
            for line in f:
                fields = line.split(None, 5)
                if len(fields) == 6 and re.search(r"/libpython\d\.\d+[^/]*\.so", fields[5]):
                    return fields[5].strip()
        return None


def frames_of(stack_key):
    """Frames of a parsed stack key "comm;frame;frame"."""
    return stack_key.split(";")[1:]


def python_frames(frames):
    return [f for f in frames if f.endswith("_[p]")]


def describe(counter, limit=6):
    lines = []
    for key, count in counter.most_common(limit):
        text = key if len(key) < 700 else key[:300] + " ... " + key[-350:]
        lines.append("  %6d %s" % (count, text))
    return "\n".join(lines) or "  (no samples)"


def check_python_frames(workload, stacks):
    """Every thread of the workload shows its frames in root-to-leaf order,
    the deep one truncated, and the syscall thread a syscall-entry kernel
    frame. `stacks` is a Counter of the workload's parsed stacks."""
    e = workload.expected
    matched = dict.fromkeys(["main", "worker-method", "worker-cls", "syscall-loop",
                             "deep-recursion", "syscall-entry"], 0)
    for key, count in stacks.items():
        frames = frames_of(key)
        py = python_frames(frames)
        for name in ("main", "worker-method", "worker-cls", "syscall-loop"):
            if py == e[name]:
                matched[name] += count
        if (frames and frames[0] == "[Truncated Python Stack]_[pe]"
                and py[-len(e["deep-recursion"]):] == e["deep-recursion"]
                and all(f == e["deep-recursion"][0] for f in py[:-1])):
            matched["deep-recursion"] += count
        if py == e["syscall-loop"] and any(SYSCALL_ENTRY.match(f) for f in frames):
            matched["syscall-entry"] += count
    log("samples per expected stack: %s" % matched)
    missing = [name for name, n in matched.items() if n == 0]
    check(not missing,
          "no sample shows the expected stack of %s.\nExpected Python frames:\n%s\n"
          "Syscall entry: a frame matching %s in the syscall-loop stack.\n"
          "Most frequent stacks of the workload:\n%s"
          % (missing, json.dumps(e, indent=1), SYSCALL_ENTRY.pattern, describe(stacks)))


# --- running PyPerf as gProfiler does ----------------------------------------

@contextlib.contextmanager
def running(harness, exit_timeout=30):
    """harness.start() ... harness.stop() (SIGTERM and reap, as gProfiler
    stops PyPerf). PyPerf is always reaped: after a failure it is killed, and
    a PyPerf that ignores SIGTERM for `exit_timeout` s is killed and fails
    the test."""
    harness.start()
    log("PyPerf ready after %.2fs (its output file exists; gProfiler waits %ss)"
        % (harness.start_seconds, harness.poll_timeout))
    try:
        yield harness
    except BaseException:
        harness.kill()
        raise
    process = harness.process
    watchdog = threading.Timer(exit_timeout, process.kill)
    watchdog.start()
    try:
        status, _, _ = harness.stop()
    finally:
        watchdog.cancel()
    check(status == 0, "PyPerf exited with status %s on SIGTERM (expected 0); stderr:\n%s"
          % (status, gp._tail(bytes(harness.stderr_log))))


def run_cycles(harness, workload, cycles, require_samples=True):
    """gProfiler's snapshot() `cycles` times; checks each cycle's file and
    returns the workload's stacks summed over all cycles."""
    total = Counter()
    for i in range(cycles):
        waited = []

        def wait():
            # The interval: until the workload has run for it.
            workload.wait_cpu(harness.duration)
            waited.append(time.monotonic())

        snap = harness.snapshot(wait=wait)
        took = time.monotonic() - waited[0]
        ours = snap.parsed.get(workload.pid, Counter())
        log("cycle %d: %d lines, %d samples (%d of the workload), %d bad lines, "
            "%d older files deleted, dump took %.2fs"
            % (i + 1, len(snap.text.splitlines()), snap.samples(), sum(ours.values()),
               len(snap.bad_lines), len(snap.deleted), took))
        check(not snap.bad_lines, "cycle %d: %d lines gProfiler cannot parse, e.g.:\n%s"
              % (i + 1, len(snap.bad_lines), "\n".join(repr(l) for l in snap.bad_lines[:8])))
        check(not snap.deleted, "cycle %d: one SIGUSR2 gave several files; gProfiler keeps %s "
              "and deletes %s unread" % (i + 1, snap.path, snap.deleted))
        if require_samples:
            check(ours, "cycle %d: no sample of the workload (pid %d) in %s; PyPerf stderr:\n%s"
                  % (i + 1, workload.pid, snap.path, gp._tail(bytes(harness.stderr_log))))
        total.update(ours)
    return total


def wait_for_stderr(harness, done, timeout, what):
    """Reads PyPerf's pipes as gProfiler does until done(its stderr so far)
    holds; a Failure naming `what` after `timeout` seconds."""
    def ready():
        harness.read_outputs()
        return done(bytes(harness.stderr_log))
    try:
        gp.wait_event(timeout, ready, interval=0.05)
    except TimeoutError:
        raise Failure("%s within %d s; stderr:\n%s"
                      % (what, timeout, gp._tail(bytes(harness.stderr_log))))


@contextlib.contextmanager
def storage_dir():
    path = tempfile.mkdtemp(prefix="pyperf-gprofiler-")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def kernel_offsets():
    try:
        return gp.kernel_task_offsets()
    except (OSError, ValueError) as e:
        raise Skip("cannot read task_struct offsets from BTF: %s" % e)


# --- cases ---------------------------------------------------------------------

def case_startup(args):
    """gProfiler's test(): exit 0 within 10 s and at least one <output>.*
    file, without and with --fs-offset/--stack-offset; the files are then
    deleted."""
    require_pyperf(args.pyperf)
    require_bpf_capabilities()
    offsets = kernel_offsets()
    with storage_dir() as d:
        for label, kernel in (("without offsets", None), ("with --fs-offset %d --stack-offset %d" % offsets,
                                                          offsets)):
            harness = gp.PythonEbpfHarness(args.pyperf, d, 1, CYCLE_SECONDS, kernel_offsets=kernel)
            result = harness.test()
            log("start-up check %s: exit %d after %.2fs, files %s"
                % (label, result.returncode, result.elapsed, [os.path.basename(f) for f in result.files]))
            check(result.returncode == 0, "start-up check %s: exit status %d, stderr:\n%s"
                  % (label, result.returncode, gp._tail(result.stderr)))
            check(re.match(r"^pyperf\.[A-Za-z]{16}\.col$", os.path.basename(harness.output_path)),
                  "output name %s is not gProfiler's" % harness.output_path)
            for f in result.files:
                check(re.match(re.escape(harness.output_path) + r"\.\d{16}$", f),
                      "start-up check wrote %s, not <output>.<16 digits>" % f)
                with open(f, "rb") as fh:
                    _, bad = gp.parse_many_collapsed(fh.read().decode("utf-8"))
                check(not bad, "start-up output has lines gProfiler cannot parse: %r" % bad[:8])
                os.unlink(f)
            check(not glob.glob(harness.output_path + ".*"), "output files remain after deletion")


def cycles_harness(args, d, **kw):
    return gp.PythonEbpfHarness(args.pyperf, d, 1000, CYCLE_SECONDS, **kw)


def case_cycles(args):
    """gProfiler's continuous run with -v 4 and the kernel offsets, 5 cycles
    at -F 1000: every line parses, one file per SIGUSR2, the workload's
    Python frames and a syscall-entry kernel frame, and PyPerf never comes
    within PIPE_BUF of filling a pipe between two cycles (gProfiler reads
    64 KiB per pipe per cycle, and a full pipe blocks PyPerf)."""
    require_pyperf(args.pyperf)
    require_bpf_capabilities()
    python = resolve_python(args.python)
    offsets = kernel_offsets()
    with storage_dir() as d, Workload(python) as workload:
        log("workload: %s (CPython %d.%d), pid %d" % (python, workload.version[0], workload.version[1],
                                                       workload.pid))
        harness = cycles_harness(args, d, verbose=True, kernel_offsets=offsets)
        with running(harness):
            log("PyPerf: %s" % " ".join(harness.start_command()))
            stacks = run_cycles(harness, workload, 5)
            check(harness.process.poll() is None, "PyPerf exited during the cycles")
        # A pipe never holds more than its capacity (64 KiB), so a read of
        # nearly that much is the sign of a writer that filled it and
        # blocked: its lines (each at most PIPE_BUF, written whole) must
        # leave at least PIPE_BUF free.
        budget = min(harness.OUTPUT_READ_SIZE, harness.pipe_capacity) - select.PIPE_BUF
        check(harness.largest_read <= budget,
              "PyPerf wrote %d bytes to one pipe between two cycles: gProfiler reads %d per "
              "cycle from a pipe of %d, so PyPerf (which writes whole lines of up to %d) may "
              "have blocked on a full pipe, losing samples and dumps"
              % (harness.largest_read, harness.OUTPUT_READ_SIZE, harness.pipe_capacity,
                 select.PIPE_BUF))
        check_python_frames(workload, stacks)


def case_native(args):
    """Native frames as gProfiler's tests expect them: the interpreter's eval
    function as a _[pn] frame between the Python and the kernel frames; with
    --insert-dso-name it names libpython (shared builds) or the executable,
    without it no DSO at all."""
    require_pyperf(args.pyperf)
    require_bpf_capabilities()
    python = resolve_python(args.python)
    offsets = kernel_offsets()
    failures = []
    with storage_dir() as d, Workload(python) as workload:
        eval_frame = workload.eval_function + "_[pn]"
        libpython = workload.libpython()
        log("workload: %s (CPython %d.%d), pid %d, %s"
            % (python, workload.version[0], workload.version[1], workload.pid,
               "interpreter in " + libpython if libpython else "interpreter in the executable"))

        harness = cycles_harness(args, d, kernel_offsets=offsets)
        with running(harness):
            stacks = run_cycles(harness, workload, 2)
        with_eval = [k for k in stacks if eval_frame in frames_of(k)]
        if not with_eval:
            failures.append("no %s frame in any stack of the workload; most frequent stacks:\n%s"
                            % (eval_frame, describe(stacks)))
        misplaced = []
        for key in with_eval:
            frames = frames_of(key)
            at = frames.index(eval_frame)
            last_python = max((i for i, f in enumerate(frames) if f.endswith("_[p]")), default=-1)
            first_kernel = min((i for i, f in enumerate(frames) if f.endswith("_[k]")), default=len(frames))
            if not last_python < at < first_kernel:
                misplaced.append(key)
        if misplaced:
            failures.append("%s is not between the innermost Python frame and the kernel frames in:\n%s"
                            % (eval_frame, "\n".join(misplaced[:3])))
        with_dso = [f for k in stacks for f in frames_of(k) if DSO_IN_NATIVE_FRAME.search(f)]
        if with_dso:
            failures.append("without --insert-dso-name, native frames name their DSO: %s" % with_dso[:5])

        harness = cycles_harness(args, d, kernel_offsets=offsets, insert_dso_name=True,
                                 user_stacks_pages=2)
        with running(harness):
            log("PyPerf: %s" % " ".join(harness.start_command()))
            stacks = run_cycles(harness, workload, 2)
        if libpython:
            if workload.version[0] == 3:  # gProfiler's own test pattern
                pattern = r"_PyEval_EvalFrameDefault \(.+?/libpython3\.\d+.*?\.so.*?\)_\[pn\]"
            else:
                pattern = re.escape(workload.eval_function) + r" \(.+?/libpython\d\.\d+.*?\.so.*?\)_\[pn\]"
        else:
            pattern = re.escape("%s (%s)_[pn]" % (workload.eval_function, os.path.realpath(python)))
        if not any(re.search(pattern, k) for k in stacks):
            failures.append("with --insert-dso-name, no stack matches %s; most frequent stacks:\n%s"
                            % (pattern, describe(stacks)))
    check(not failures, "\n\n".join(failures))


def dump_lines(stderr_text):
    """(samples collected, file) of each dump line PyPerf printed."""
    dumps = []
    for line in stderr_text.splitlines():
        m = re.match(r"^PyPerf: samples collected: (\d+),.*\boutput: ([^\s,]+)", line)
        if m:
            dumps.append((int(m.group(1)), m.group(2)))
    return dumps


def case_signal_storm(args):
    """100 SIGUSR2 10 ms apart: PyPerf keeps running, and every file it
    reports exists and holds the count it reports, so the files add up to
    the samples collected. Then a normal gProfiler cycle still works."""
    require_pyperf(args.pyperf)
    require_bpf_capabilities()
    python = resolve_python(args.python)
    with storage_dir() as d, Workload(python) as workload:
        # PyPerf finds the kernel offsets itself; -v 4 for its round lines.
        harness = cycles_harness(args, d, verbose=True)
        collected = {}  # file -> samples in it

        def collect():
            for path in sorted(glob.glob(harness.output_path + ".*")):
                with open(path, "rb") as f:
                    parsed, bad = gp.parse_many_collapsed(f.read().decode("utf-8"))
                os.unlink(path)
                check(not bad, "%s has lines gProfiler cannot parse: %r" % (path, bad[:8]))
                check(path not in collected, "file name %s was used twice" % path)
                collected[path] = sum(sum(c.values()) for c in parsed.values())

        with running(harness):
            workload.wait_cpu(CYCLE_SECONDS)
            for _ in range(100):
                harness.send_dump_signal()
                harness.read_outputs()
                time.sleep(0.01)
            # Let the last dumps land, on PyPerf's word: a dump asked for is
            # written in the loop round that sees it, and -v 3 logs a round
            # at most once a second. Three more "round" lines than read so far
            # (one may have been in the pipe) are two rounds after the last
            # signal.
            rounds = bytes(harness.stderr_log).count(b"PyPerf: round ")
            wait_for_stderr(harness, lambda err: err.count(b"PyPerf: round ") >= rounds + 3, 60,
                            "PyPerf logged no two rounds after the storm")
            collect()
            check(harness.process.poll() is None,
                  "PyPerf died after 100 SIGUSR2 (status %s); stderr:\n%s"
                  % (harness.process.poll(), gp._tail(bytes(harness.stderr_log))))
            storm_files = len(collected)
            snap = harness.snapshot()  # a normal cycle afterwards
            check(not snap.bad_lines and not snap.deleted and snap.samples(workload.pid) > 0,
                  "the gProfiler cycle after the storm failed: %d bad lines, deleted %s, %d samples"
                  % (len(snap.bad_lines), snap.deleted, snap.samples(workload.pid)))
            collected[snap.path] = snap.samples()
        collect()  # the final dump on SIGTERM
        dumps = dump_lines(bytes(harness.stderr_log).decode("utf-8", "replace"))
        reported = dict((f, n) for n, f in dumps)
        log("storm: %d files from 100 signals; %d dumps reported, %d files read, %d samples reported, "
            "%d samples in files" % (storm_files, len(dumps), len(collected),
                                     sum(n for n, _ in dumps), sum(collected.values())))
        check(len(reported) == len(dumps), "a file name was reported twice: %s" % dumps)
        lost_files = sorted(set(reported) - set(collected))
        check(not lost_files, "PyPerf reported files that never appeared: %s" % lost_files[:10])
        unreported = sorted(set(collected) - set(reported))
        check(not unreported, "files PyPerf did not report: %s" % unreported[:10])
        wrong = [(f, reported[f], collected[f]) for f in reported if reported[f] != collected[f]]
        check(not wrong, "files whose count differs from PyPerf's (file, reported, in file): %s" % wrong[:10])
        check(sum(collected.values()) == sum(n for n, _ in dumps), "sample totals differ")
        check(sum(collected.values()) > 0, "no samples at all")


def case_restart(args):
    """PyPerf SIGKILLed mid-run: the next cycle times out after 5 s, the
    harness terminates and reaps it and starts a new one (gProfiler's
    PythonProfiler.snapshot), and the new PyPerf profiles the workload."""
    require_pyperf(args.pyperf)
    require_bpf_capabilities()
    python = resolve_python(args.python)
    with storage_dir() as d, Workload(python) as workload:
        harness = cycles_harness(args, d, kernel_offsets=kernel_offsets())
        with running(harness):
            run_cycles(harness, workload, 1)
            killed = harness.process
            killed.send_signal(signal.SIGKILL)
            log("SIGKILL sent to PyPerf pid %d" % killed.pid)
            started = time.monotonic()
            check(harness.snapshot_or_restart() is None, "a cycle of a killed PyPerf returned a profile")
            log("cycle of the killed PyPerf: failed after %.2fs (%s), PyPerf restarted as pid %d"
                % (time.monotonic() - started, harness.errors[-1].why, harness.process.pid))
            check(harness.restarts == 1, "expected one restart, got %d" % harness.restarts)
            check(harness.errors[-1].returncode == -signal.SIGKILL,
                  "the killed PyPerf was reaped with status %r" % harness.errors[-1].returncode)
            check(killed.returncode is not None, "the killed PyPerf was not reaped")
            check(harness.process is not killed and harness.process.poll() is None,
                  "no new PyPerf is running")
            # The killed PyPerf left its transient file behind, so start()
            # returned at once, as in gProfiler, before the new PyPerf is
            # ready. gProfiler's next SIGUSR2 comes an interval (60 s by
            # default) later; the 1 s of the other cycles could hit PyPerf
            # while it still loads its BPF program, so the test waits for
            # the new PyPerf's "Ready to profile" first.
            wait_for_stderr(harness, lambda err: err.count(b"Ready to profile") >= 2, 120,
                            "the restarted PyPerf did not become ready")
            stacks = run_cycles(harness, workload, 3)
        check_python_frames(workload, stacks)


FAKE_PYPERF = r"""#!/usr/bin/python3
# A fake PyPerf for the harness self-test; FAKE_PYPERF_MODE says what to do.
import os, signal, sys, time
mode = os.environ["FAKE_PYPERF_MODE"]
path = sys.argv[sys.argv.index("--output") + 1]
sys.stdout.write("fake stdout\n"); sys.stdout.flush()
sys.stderr.write("fake stderr\n"); sys.stderr.flush()
def on_term(signum, frame):
    sys.stderr.write("fake got SIGTERM\n"); sys.stderr.flush()
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
if mode == "no-output":
    time.sleep(60)
elif mode == "ignore-dump":
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    open(path, "w").close()
    open(os.path.join(os.environ["FAKE_PYPERF_READY_DIR"], str(os.getpid())), "w").close()
    time.sleep(60)
"""


def case_harness_selftest(args):
    """The harness reproduces gProfiler: its parsing rules, its report when
    PyPerf does not start, and its restart after a dump timeout."""
    lines = [
        "python3-with-dash-12/13;a (x.py:1)_[p];b (y z.py:2)_[p] 5",
        "python3-with-dash-12/14;a (x.py:1)_[p];b (y z.py:2)_[p] 2",
        "py-7/7;[Truncated Python Stack]_[pe];f_[pn] 1",
        "no-frames-1/1 3",
        "x-1/1;a notanumber",
        "x-abc/1;a 1",
        "",
        "nocount;a",
    ]
    parsed, bad = gp.parse_many_collapsed("\n".join(lines) + "\n")
    check(dict(parsed[12]) == {"python3-with-dash;a (x.py:1)_[p];b (y z.py:2)_[p]": 7},
          "pid 12 parsed as %r" % dict(parsed[12]))
    check(dict(parsed[7]) == {"py;[Truncated Python Stack]_[pe];f_[pn]": 1}, "pid 7: %r" % dict(parsed[7]))
    check(bad == lines[3:], "bad lines %r" % bad)
    check(re.match(r"^[A-Za-z]{16}$", gp.random_prefix()), "random prefix")
    check(module_name("/usr/lib/python3.11/threading.py") == "threading", "module of threading")
    check(module_name("/a/lib/python3.12/site-packages/pkg/__init__.py") == "pkg", "module of a package")
    check(module_name("/work/x/calltree.py") == "work.x.calltree", "module of a script")

    with storage_dir() as d:
        # Several dumped files: gProfiler keeps the one sorting last, deletes the rest.
        prefix = os.path.join(d, "pyperf.%s.col" % gp.random_prefix())
        for stamp in ("2026010203040599", "2026010203040601", "2026010203040600"):
            open("%s.%s" % (prefix, stamp), "w").close()
        open(prefix, "w").close()  # the transient file is not a dump
        path, deleted = gp.wait_for_file_by_prefix(prefix + ".", 1)
        check(path == prefix + ".2026010203040601" and sorted(deleted) == [
            prefix + ".2026010203040599", prefix + ".2026010203040600"],
            "kept %s, deleted %s" % (path, deleted))
        check(sorted(glob.glob(prefix + "*")) == [prefix, path], "files left: %s" % glob.glob(prefix + "*"))

        fake = os.path.join(d, "fake-pyperf")
        with open(fake, "w") as f:
            f.write(FAKE_PYPERF)
        os.chmod(fake, 0o755)

        os.environ["FAKE_PYPERF_MODE"] = "no-output"
        harness = gp.PythonEbpfHarness(fake, d, 1000, 0.1, poll_timeout=1)
        try:
            harness.start()
            harness.stop()
            raise Failure("start() returned although the transient file never appeared")
        except gp.PyPerfFailedToStart as e:
            check("PyPerf failed to start" in str(e) and b"fake stdout" in e.stdout
                  and b"fake stderr" in e.stderr, "the failed start report lacks the outputs: %s" % e)
            check(e.returncode == -signal.SIGKILL, "the fake was not killed: %r" % e.returncode)
        check(not harness.is_running(), "harness thinks a failed PyPerf runs")

        # The fake marks itself ready in its own directory once its signal
        # handlers are in: a restarted fake finds the first one's transient
        # file, so start() cannot tell when it is ready (as in gProfiler).
        ready_dir = os.path.join(d, "ready")
        os.mkdir(ready_dir)
        os.environ["FAKE_PYPERF_MODE"] = "ignore-dump"
        os.environ["FAKE_PYPERF_READY_DIR"] = ready_dir
        ready = lambda: os.path.exists(os.path.join(ready_dir, str(harness.process.pid)))  # noqa: E731
        harness = gp.PythonEbpfHarness(fake, d, 1000, 0.1, dump_timeout=1)
        with running(harness):
            gp.wait_event(10, ready)
            first = harness.process
            check(harness.snapshot_or_restart() is None, "a timed-out cycle returned a profile")
            check(first.returncode == 0 and b"fake got SIGTERM" in harness.errors[0].stderr,
                  "the stuck fake was not stopped with SIGTERM: status %r, stderr %r"
                  % (first.returncode, harness.errors[0].stderr))
            check(harness.restarts == 1 and harness.process is not first and harness.process.poll() is None,
                  "no restart after the dump timeout")
            gp.wait_event(10, ready)
        log("harness self-test passed")


CASES = {name[len("case_"):].replace("_", "-"): fn for name, fn in globals().items()
         if name.startswith("case_")}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pyperf", help="the PyPerf binary")
    parser.add_argument("--python", default="/usr/bin/python3.11", help="interpreter path or pyenv:X.Y")
    parser.add_argument("case", choices=sorted(CASES))
    args = parser.parse_args()
    return script_support.run(lambda: CASES[args.case](args), args.case)


if __name__ == "__main__":
    sys.exit(main())
