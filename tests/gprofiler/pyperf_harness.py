"""A stand-in for gProfiler 1.50's PythonEbpfProfiler: drives PyPerf the way
gProfiler does, so the tests can check that our PyPerf is a drop-in.

gProfiler's wrapper (gprofiler/profilers/python_ebpf.py, with the helpers it
calls from gprofiler/utils and gprofiler/utils/collapsed_format.py, and the
restart in gprofiler/profilers/python.py) is reproduced point by point; each
point is marked "gProfiler:" below. Everything else here (the byte counters,
the logs of what was read) is instrumentation for the tests and changes
nothing PyPerf sees.

Python 3 standard library only: gProfiler's psutil, granulate_utils and
logging are replaced by plain equivalents.
"""
import ctypes
import fcntl
import glob
import os
import random
import resource
import selectors
import signal
import string
import struct
import subprocess
import time
from collections import Counter, defaultdict
from dataclasses import dataclass


class PyPerfError(Exception):
    """gProfiler: PythonEbpfError, a CalledProcessError carrying PyPerf's exit
    status, command line, stdout and stderr."""

    def __init__(self, returncode, args, stdout, stderr, why):
        self.returncode = returncode
        self.cmd = args
        self.stdout = stdout
        self.stderr = stderr
        self.why = why
        super().__init__(
            "%s: exit status %r, command %r\n--- stdout ---\n%s\n--- stderr ---\n%s"
            % (why, returncode, args, _tail(stdout), _tail(stderr)))


class PyPerfFailedToStart(PyPerfError):
    """gProfiler logs "PyPerf failed to start" with stdout and stderr, then
    raises the TimeoutError of its wait."""


def _tail(text, limit=4000):
    if isinstance(text, bytes):
        text = text.decode("latin-1")
    return text if len(text) <= limit else "...\n" + text[-limit:]


# --- gprofiler/utils -------------------------------------------------------

def random_prefix():
    """gProfiler: 16 random ASCII letters name the output file."""
    return "".join(random.choice(string.ascii_letters) for _ in range(16))


def _child_setup():
    """gProfiler's start_process: the child gets SIGTERM when its parent dies
    (prctl PR_SET_PDEATHSIG) and runs in its own process group (os.setpgrp)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass
    os.setpgrp()


def start_process(cmd):
    """gProfiler's start_process: stdout and stderr are pipes, stdin a pipe."""
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.PIPE, preexec_fn=_child_setup)


def wait_event(timeout, condition, interval=0.1):
    """gProfiler's wait_event: checks `condition` every `interval` seconds and
    raises TimeoutError once `timeout` has passed."""
    end_time = time.monotonic() + timeout
    while True:
        if condition():
            return
        time.sleep(interval)
        if time.monotonic() > end_time:
            raise TimeoutError()


def reap_process(process):
    """gProfiler's reap_process: communicate() (not wait(), which can deadlock
    on full pipes), then the exit status."""
    stdout, stderr = process.communicate()
    returncode = process.poll()
    assert returncode is not None
    return returncode, stdout, stderr


def wait_for_file_by_prefix(prefix, timeout):
    """gProfiler's wait_for_file_by_prefix: waits for any file "<prefix>*";
    if there are several, deletes all but the one sorting last (the names sort
    by time) and returns it. Returns (path, deleted paths)."""
    pattern = prefix + "*"
    wait_event(timeout, lambda: len(glob.glob(pattern)) > 0)
    files = sorted(glob.glob(pattern))
    deleted = []
    for f in files[:-1]:
        os.unlink(f)
        deleted.append(f)
    return files[-1], deleted


# --- gprofiler/utils/collapsed_format.py -----------------------------------

def parse_many_collapsed(text):
    """gProfiler's parse_many_collapsed, which also returns the lines it could
    not parse (gProfiler logs and drops them).

    Each line: rsplit(" ", 1) -> stack, count; stack.split(";", 1) -> first
    token, frames; first token rsplit("-", 1) -> comm, "pid/tid"; pid is the
    integer before "/". Stacks are keyed "comm;frames" per pid and counts
    summed. Only ValueError marks a bad line, as in gProfiler.
    """
    results = defaultdict(Counter)
    bad_lines = []
    for line in text.splitlines():
        try:
            stack, count = line.rsplit(" ", maxsplit=1)
            comm_pid_tid, stack = stack.split(";", maxsplit=1)
            comm, pid_tid = comm_pid_tid.rsplit("-", maxsplit=1)
            pid = int(pid_tid.split("/")[0])
            results[pid]["%s;%s" % (comm, stack)] += int(count)
        except ValueError:
            bad_lines.append(line)
    return results, bad_lines


# --- kernel offsets ----------------------------------------------------------

_BTF_KIND_EXTRA = {  # bytes after the 12-byte btf_type, by kind (vlen = v)
    1: lambda v: 4,        # INT
    3: lambda v: 12,       # ARRAY
    4: lambda v: 12 * v,   # STRUCT
    5: lambda v: 12 * v,   # UNION
    6: lambda v: 8 * v,    # ENUM
    13: lambda v: 8 * v,   # FUNC_PROTO
    14: lambda v: 4,       # VAR
    15: lambda v: 12 * v,  # DATASEC
    17: lambda v: 4,       # DECL_TAG
    19: lambda v: 12 * v,  # ENUM64
}
_BTF_MODIFIERS = (8, 9, 10, 11, 18)  # TYPEDEF VOLATILE CONST RESTRICT TYPE_TAG


def kernel_task_offsets(btf_path="/sys/kernel/btf/vmlinux"):
    """(task_struct.thread.fsbase, task_struct.stack) byte offsets from the
    kernel's BTF. gProfiler gets the same two numbers from its get_fs_offset
    and get_stack_offset helpers and passes them as --fs-offset and
    --stack-offset; reading BTF here keeps them independent of PyPerf."""
    with open(btf_path, "rb") as f:
        data = f.read()
    magic, _, _, hdr_len, type_off, type_len, str_off, str_len = struct.unpack_from(
        "<HBBIIIII", data, 0)
    if magic != 0xEB9F:
        raise ValueError("%s is not BTF" % btf_path)
    types = data[hdr_len + type_off:hdr_len + type_off + type_len]
    strings = data[hdr_len + str_off:hdr_len + str_off + str_len]

    def name(off):
        return strings[off:strings.index(b"\0", off)]

    table = [None]  # type id -> (kind, name_off, size_or_type, member offset in `types`, vlen, kflag)
    pos = 0
    while pos < len(types):
        name_off, info, size_or_type = struct.unpack_from("<III", types, pos)
        kind, vlen, kflag = (info >> 24) & 0x1F, info & 0xFFFF, info >> 31
        table.append((kind, name_off, size_or_type, pos + 12, vlen, kflag))
        pos += 12 + _BTF_KIND_EXTRA.get(kind, lambda v: 0)(vlen)

    def resolve(type_id):
        while table[type_id][0] in _BTF_MODIFIERS:
            type_id = table[type_id][2]
        return type_id

    def member_bits(type_id, member):
        """Bit offset of `member` in struct/union `type_id`, looking into
        anonymous members; None if absent."""
        kind, _, _, members, vlen, kflag = table[type_id]
        if kind not in (4, 5):
            return None
        for i in range(vlen):
            m_name, m_type, m_off = struct.unpack_from("<III", types, members + 12 * i)
            bits = m_off & 0xFFFFFF if kflag else m_off
            if name(m_name) == member.encode():
                return bits, m_type
            if m_name == 0:
                inner = member_bits(resolve(m_type), member)
                if inner is not None:
                    return bits + inner[0], inner[1]
        return None

    task = next((i for i, t in enumerate(table)
                 if t and t[0] == 4 and t[4] and name(t[1]) == b"task_struct"), None)
    if task is None:
        raise ValueError("no struct task_struct in %s" % btf_path)
    thread = member_bits(task, "thread")
    stack = member_bits(task, "stack")
    if thread is None or stack is None:
        raise ValueError("task_struct has no thread or stack member in %s" % btf_path)
    fsbase = member_bits(resolve(thread[1]), "fsbase")
    if fsbase is None:
        raise ValueError("thread_struct has no fsbase member in %s" % btf_path)
    return (thread[0] + fsbase[0]) // 8, stack[0] // 8


# --- gprofiler/profilers/python_ebpf.py --------------------------------------

@dataclass
class Snapshot:
    """What one gProfiler cycle got: the parsed profile (pid -> Counter of
    "comm;frames"), the lines gProfiler would have dropped, the file read and
    the older files it deleted unread."""

    path: str
    text: str
    parsed: dict
    bad_lines: list
    deleted: list

    def samples(self, pid=None):
        if pid is None:
            return sum(sum(c.values()) for c in self.parsed.values())
        return sum(self.parsed.get(pid, Counter()).values())


@dataclass
class StartupCheck:
    """The outcome of PythonEbpfHarness.test()."""

    returncode: int
    elapsed: float
    files: list
    stdout: bytes
    stderr: bytes


class PythonEbpfHarness(object):
    """gProfiler's PythonEbpfProfiler, minus gProfiler."""

    MAX_FREQUENCY = 1000
    EVENTS_BUFFER_PAGES = 256
    SYMBOLS_MAP_SIZE = 131072
    DUMP_SIGNAL = signal.SIGUSR2
    DUMP_TIMEOUT = 5  # seconds
    POLL_TIMEOUT = 10  # seconds
    OUTPUT_READ_SIZE = 65536  # bytes read from each pipe per cycle

    def __init__(self, pyperf, storage_dir, frequency, duration, insert_dso_name=False,
                 user_stacks_pages=None, verbose=False, kernel_offsets=None,
                 poll_timeout=None, dump_timeout=None):
        """`kernel_offsets` is (fs, stack) to pass as gProfiler does, or None
        to let PyPerf find them. The timeouts default to gProfiler's; only
        the harness's own self-test shortens them."""
        self.pyperf = pyperf
        self.frequency = min(frequency, self.MAX_FREQUENCY)
        self.duration = duration
        self.insert_dso_name = insert_dso_name
        self.user_stacks_pages = user_stacks_pages
        self.verbose = verbose
        self.kernel_offsets = kernel_offsets
        self.poll_timeout = self.POLL_TIMEOUT if poll_timeout is None else poll_timeout
        self.dump_timeout = self.DUMP_TIMEOUT if dump_timeout is None else dump_timeout
        # gProfiler: <storage dir>/pyperf.<16 random letters>.col
        self.output_path = os.path.join(storage_dir, "pyperf.%s.col" % random_prefix())
        self.process = None
        self.selector = None
        # Instrumentation: everything read from PyPerf, across restarts.
        self.stdout_log = bytearray()
        self.stderr_log = bytearray()
        self.largest_read = 0  # the biggest single read1(); OUTPUT_READ_SIZE means a backlog
        self.pipe_capacity = None  # bytes PyPerf can write to a pipe before it blocks
        self.start_seconds = None  # from exec to the transient file, in the last start()
        self.restarts = 0
        self.errors = []  # PyPerfError of each failed cycle

    def base_command(self):
        """gProfiler: PyPerf, the kernel offsets, and -v 4 when verbose."""
        cmd = [self.pyperf]
        if self.kernel_offsets is not None:
            cmd += ["--fs-offset", str(self.kernel_offsets[0]),
                    "--stack-offset", str(self.kernel_offsets[1])]
        if self.verbose:
            cmd += ["-v", "4"]
        return cmd

    def _remove_outputs(self):
        for f in glob.glob(self.output_path + ".*"):
            os.unlink(f)

    @staticmethod
    def ebpf_environment():
        """gProfiler's _ebpf_environment(), in part: lift RLIMIT_MEMLOCK,
        which PyPerf inherits. gProfiler also asserts it runs in the init PID
        namespace and mounts debugfs if it is not mounted; the harness does
        not touch the host's mounts, and PyPerf does not need debugfs."""
        try:
            resource.setrlimit(resource.RLIMIT_MEMLOCK, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        except (ValueError, OSError):
            pass  # not privileged: PyPerf reports what it lacks

    def test(self):
        """gProfiler's test(): delete old outputs, run PyPerf for one second
        at 1 Hz, wait at most 10 s for it to end (killing it on timeout), and
        require an output file. gProfiler raises on a missing file; it does
        not look at the exit status, which is returned for the tests."""
        self.ebpf_environment()
        self._remove_outputs()
        cmd = self.base_command() + ["--output", self.output_path, "-F", "1", "--duration", "1"]
        started = time.monotonic()
        process = start_process(cmd)
        try:
            wait_event(self.poll_timeout, lambda: process.poll() is not None)
        except TimeoutError:
            process.kill()
            _, stdout, stderr = reap_process(process)
            raise PyPerfError(None, cmd, stdout, stderr,
                              "start-up check did not end within %ss" % self.poll_timeout)
        elapsed = time.monotonic() - started
        returncode, stdout, stderr = reap_process(process)
        files = sorted(glob.glob(self.output_path + ".*"))
        if not files:
            raise PyPerfError(returncode, cmd, stdout, stderr,
                              "start-up check left no %s.* file" % self.output_path)
        return StartupCheck(returncode, elapsed, files, stdout, stderr)

    def start_command(self):
        """gProfiler: the continuous run, without --duration."""
        cmd = self.base_command() + [
            "--output", self.output_path,
            "-F", str(self.frequency),
            "--events-buffer-pages", str(self.EVENTS_BUFFER_PAGES),
            "--symbols-map-size", str(self.SYMBOLS_MAP_SIZE),
        ]
        if self.insert_dso_name:
            cmd += ["--insert-dso-name"]
        if self.user_stacks_pages is not None:
            cmd += ["--user-stacks-pages", str(self.user_stacks_pages)]
        return cmd

    def start(self):
        """gProfiler's start(): delete old outputs (not the transient file),
        start PyPerf, wait at most 10 s for the transient file to exist; on
        a timeout kill PyPerf and report "PyPerf failed to start"."""
        cmd = self.start_command()
        self._remove_outputs()
        started = time.monotonic()
        process = start_process(cmd)
        try:
            wait_event(self.poll_timeout, lambda: os.path.exists(self.output_path))
        except TimeoutError:
            process.kill()
            # gProfiler reads both pipes to the end here; reaping does that too.
            returncode, stdout, stderr = reap_process(process)
            self.stdout_log += stdout
            self.stderr_log += stderr
            raise PyPerfFailedToStart(returncode, cmd, stdout, stderr, "PyPerf failed to start")
        self.start_seconds = time.monotonic() - started
        self.process = process
        self.pipe_capacity = min(fcntl.fcntl(p.fileno(), fcntl.F_GETPIPE_SZ)
                                 for p in (process.stdout, process.stderr))
        self.selector = selectors.DefaultSelector()
        self.selector.register(process.stdout, selectors.EVENT_READ)
        self.selector.register(process.stderr, selectors.EVENT_READ)

    def is_running(self):
        return self.process is not None

    def read_outputs(self):
        """gProfiler's _read_process_standard_outputs: one non-blocking
        select, then at most one read1(64 KiB) from each ready pipe."""
        stdout = stderr = None
        for key, _ in self.selector.select(timeout=0):
            data = key.fileobj.read1(self.OUTPUT_READ_SIZE)
            self.largest_read = max(self.largest_read, len(data))
            if key.fileobj is self.process.stdout:
                stdout = data
                self.stdout_log += data
            else:
                stderr = data
                self.stderr_log += data
        return stdout, stderr

    def send_dump_signal(self):
        self.process.send_signal(self.DUMP_SIGNAL)

    def dump(self):
        """gProfiler's _dump(): SIGUSR2, then wait at most 5 s for a file
        "<output>.*" (the '.' keeps the transient file out); read the pipes.
        On a timeout, terminate and reap PyPerf and raise PyPerfError.
        Returns (path, deleted older paths)."""
        assert self.is_running()
        self.send_dump_signal()
        try:
            found = wait_for_file_by_prefix(self.output_path + ".", self.dump_timeout)
        except TimeoutError:
            args = self.process.args
            returncode, stdout, stderr = self.terminate()
            raise PyPerfError(returncode, args, stdout, stderr,
                              "no dump within %ss of SIGUSR2" % self.dump_timeout)
        self.read_outputs()
        return found

    def snapshot(self, wait=None):
        """gProfiler's snapshot(): wait the interval, dump, read the file and
        always unlink it, parse it. Raises PyPerfError as gProfiler does.
        Not gProfiler: `wait`, when given, is called instead of sleeping the
        interval (the tests wait for their workload to have run)."""
        if wait is None:
            time.sleep(self.duration)
        else:
            wait()
        path, deleted = self.dump()
        try:
            with open(path, "rb") as f:
                text = f.read().decode("utf-8")  # strict, as Path.read_text()
            if "\x00" in text:
                raise ValueError("a NUL byte in %s" % path)
        finally:
            os.unlink(path)  # gProfiler: always, even on read/decode errors
        parsed, bad_lines = parse_many_collapsed(text)
        return Snapshot(path, text, parsed, bad_lines, deleted)

    def snapshot_or_restart(self):
        """gProfiler's PythonProfiler.snapshot() around the above: on a
        PyPerfError, start PyPerf again and return None (an empty round)."""
        try:
            return self.snapshot()
        except PyPerfError as e:
            assert not self.is_running()
            self.errors.append(e)
            self.restarts += 1
            self.start()
            return None

    def terminate(self):
        """gProfiler's _terminate(): SIGTERM and reap. Returns (exit status,
        stdout, stderr) of the rest of the pipes, or (None, b"", b"")."""
        if self.selector is not None:
            self.selector.close()
            self.selector = None
        if self.process is None:
            return None, b"", b""
        self.process.terminate()
        returncode, stdout, stderr = reap_process(self.process)
        self.process = None
        self.stdout_log += stdout
        self.stderr_log += stderr
        return returncode, stdout, stderr

    def stop(self):
        return self.terminate()

    def kill(self):
        """Not gProfiler: the tests' last-resort cleanup."""
        if self.process is not None:
            try:
                self.process.kill()
            except OSError:
                pass
        return self.terminate()
