#!/usr/bin/env python3
"""Writes the hand-made seed inputs of the fuzz targets into
tests/fuzz/corpus/<target>/seed_*. Kept so the seeds can be remade; they are
committed, and the regression tests run them as they are.

  make_seeds.py [--python-roots DIR]

fuzz_elf_and_python_detection seeds are small shared objects built here with
gcc: interpreter-like libraries whose _PyRuntime holds the real
_Py_DebugOffsets bytes of Debian's CPython 3.13 and 3.14 (read from the
python roots scripts/python-roots.sh builds, when present), a 3.11 with
Py_Version, a 3.8 and a 2.7 found by version string, plus stripped,
.gnu_debuglink and .gnu_debugdata variants and a few broken files. Each ELF
seed ends with one extra byte that picks the file name the target writes it
under (see fuzz_elf_and_python_detection.cc).

fuzz_event_to_output seeds are event records with symbols of every string
encoding; fuzz_native_unwind seeds cover each target mode (the seeds made
from a real stack are written by the target itself, PYPERF_FUZZ_WRITE_SEED).
"""
import argparse
import os
import struct
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# --- fuzz_elf_and_python_detection -----------------------------------------

def run(*cmd, cwd=None):
    subprocess.run(cmd, check=True, cwd=cwd)


def debug_offsets_blob(binary):
    """The first 1024 bytes of _PyRuntime in `binary`, and its Py_Version."""
    syms = subprocess.run(["readelf", "-sW", "--dyn-syms", binary], check=True,
                          capture_output=True, text=True).stdout
    loads = subprocess.run(["readelf", "-lW", binary], check=True, capture_output=True,
                           text=True).stdout
    addr = {}
    for line in syms.splitlines():
        parts = line.split()
        if len(parts) >= 8 and parts[7] in ("_PyRuntime", "Py_Version"):
            addr[parts[7]] = int(parts[1], 16)
    segments = []
    for line in loads.splitlines():
        parts = line.split()
        if parts and parts[0] == "LOAD":
            segments.append((int(parts[1], 16), int(parts[2], 16), int(parts[4], 16)))

    def read(vaddr, n):
        for off, va, filesz in segments:
            if va <= vaddr < va + filesz:
                with open(binary, "rb") as f:
                    f.seek(off + vaddr - va)
                    return f.read(n)
        raise ValueError("0x%x not in the file" % vaddr)

    blob = read(addr["_PyRuntime"], 1024)
    assert blob[:8] == b"xdebugpy", binary
    (version,) = struct.unpack("<Q", read(addr["Py_Version"], 8))
    return blob, version


def c_bytes(data):
    return ", ".join("0x%02x" % b for b in data)


def build_library(tmp, name, source, extra=()):
    src = os.path.join(tmp, name + ".c")
    out = os.path.join(tmp, name)
    with open(src, "w") as f:
        f.write(source)
    run("gcc", "-shared", "-fPIC", "-O1", "-nostdlib", "-fasynchronous-unwind-tables",
        "-Wl,--build-id=sha1", "-Wl,-z,max-page-size=4096", "-Wl,--hash-style=gnu",
        "-o", out, src, *extra)
    return out


FUNCTIONS = """
int _PyEval_EvalFrameDefault(int x) { return x * 3 + 1; }
int PyObject_Call(int x) { return _PyEval_EvalFrameDefault(x) + 2; }
static int helper(int x) { return x ^ 5; }
int Py_Main(int x) { return helper(PyObject_Call(x)); }
"""


def elf_seeds(roots):
    t = "fuzz_elf_and_python_detection"
    with tempfile.TemporaryDirectory() as tmp:
        libs = {}
        for minor, binary in ((13, roots and os.path.join(roots, "trixie/usr/bin/python3.13")),
                              (14, roots and os.path.join(roots, "sid/usr/bin/python3.14"))):
            if not binary or not os.path.exists(binary):
                print("skipping the 3.%d seed: %s not found" % (minor, binary))
                continue
            blob, version = debug_offsets_blob(binary)
            libs["py3%d" % minor] = build_library(tmp, "libpython3.%d.so" % minor, FUNCTIONS + """
__attribute__((aligned(64))) unsigned char _PyRuntime[1024] = { %s };
const unsigned long Py_Version = 0x%x;
char PyCode_Type[416];
""" % (c_bytes(blob), version))
        libs["py311"] = build_library(tmp, "libpython3.11.so.1.0", FUNCTIONS + """
unsigned char _PyRuntime[512];
const unsigned long Py_Version = 0x030b07f0;
char PyCode_Type[400];
""")
        libs["py38"] = build_library(tmp, "libpython3.8.so", FUNCTIONS + """
unsigned char _PyRuntime[512];
char PyCode_Type[400];
const char *Py_GetVersion(void) { return "3.8.18"; }
const char *unicodedata_version(void) { return "3.2.0"; }
""")
        libs["py27"] = build_library(tmp, "libpython2.7.so", FUNCTIONS + """
void *_PyThreadState_Current;
static void *interp_head;
void *PyString_FromString(const char *s) { return (void *)s; }
void *get_head(void) { return interp_head; }
char PyCode_Type[200];
const char *Py_GetVersion(void) { return "2.7.18"; }
""")
        # Name selectors (last byte % 4): 0 libpython3.so, 1 libpython3.11.so.1.0,
        # 2 libpython2.7.so, 3 python3.13.
        selector = {"py313": 3, "py314": 0, "py311": 1, "py38": 0, "py27": 2}
        for key, path in libs.items():
            with open(path, "rb") as f:
                data = f.read()
            write(t, "seed_%s.so" % key, data + bytes([selector[key]]))
        base = libs["py311"]
        stripped = os.path.join(tmp, "stripped.so")
        run("strip", "--strip-all", "-o", stripped, base)
        debuglink = os.path.join(tmp, "debuglink.so")
        run("objcopy", "--only-keep-debug", base, os.path.join(tmp, "base.debug"))
        run("objcopy", "--add-gnu-debuglink=base.debug", stripped, debuglink, cwd=tmp)
        mini = os.path.join(tmp, "mini")
        run("objcopy", "-S", "--keep-symbol=helper", os.path.join(tmp, "base.debug"), mini)
        run("xz", "-f", mini)
        minidebug = os.path.join(tmp, "minidebug.so")
        run("objcopy", "--add-section", ".gnu_debugdata=" + mini + ".xz", stripped, minidebug)
        for name, path in (("stripped", stripped), ("debuglink", debuglink),
                           ("minidebug", minidebug)):
            with open(path, "rb") as f:
                write(t, "seed_%s.so" % name, f.read() + b"\x01")
        with open(base, "rb") as f:
            whole = f.read()
        write(t, "seed_truncated_headers", whole[:200])
        write(t, "seed_truncated_half", whole[: len(whole) // 2])
        write(t, "seed_garbage", bytes((i * 37 + 11) & 0xff for i in range(300)))
        write(t, "seed_empty", b"")
        if "py313" in libs:
            with open(libs["py313"], "rb") as f:
                data = f.read()
            start = data.find(b"xdebugpy")
            write(t, "seed_debug_offsets_313", data[start:start + 1024])


# --- fuzz_event_to_output ----------------------------------------------------

def text(raw, encoding, size=None):
    return raw, struct.pack("<IB3x", len(raw) if size is None else size, encoding)


def symbol(cls, function, file, first_line):
    """A raw pyperf_symbol: each of cls/function/file is (bytes, encoding[, size])."""
    def buf(raw, n):
        return raw[:n].ljust(n, b"\0")

    (c, ct), (fn, ft), (fl, flt) = (text(*cls), text(*function), text(*file))
    return (buf(c, 32) + buf(fn, 64) + buf(fl, 256) + ct + ft + flt +
            struct.pack("<i", first_line))


def task(coro_symbol, name=b"", name_kind=1, number=0, encoding=1, size=None):
    """A raw pyperf_task: its coroutine's symbol id, its name (PYPERF_TASK_NAME_*)."""
    _, name_text = text(name, encoding, size)
    return (struct.pack("<iB3x", coro_symbol, name_kind) + name_text +
            struct.pack("<Q", number) + name[:64].ljust(64, b"\0"))


def event(tid, comm, frames, kernel_stack_id=-14, error=0, truncated=0, mm=0, ip=0, sp=0,
          user_stack=b"", user_stack_start=0, generation=0, no_thread_state=0, entries=(),
          stack_cut=0, tasks=(), task_error=0, task_frame=0):
    head = struct.pack("<II16siIBBBBIQQQQQIBBBBHH4x", 0, tid, comm, kernel_stack_id, len(frames),
                       error, truncated, 0, no_thread_state, generation, ip, sp, 0, mm,
                       user_stack_start, len(user_stack), 0, stack_cut, 0, task_error,
                       len(tasks), task_frame)
    # tasks[8] (--async-tasks), entries[128] (PYPERF_ENTRY_* per frame), then frames[128].
    body = b"".join(tasks).ljust(8 * 88, b"\0")
    body += b"".join(struct.pack("<I", e) for e in entries).ljust(128 * 4, b"\0")
    body += b"".join(struct.pack("<iiQ", sid, lasti, code)
                     for sid, lasti, code in frames).ljust(128 * 16, b"\0")
    record = head + body + user_stack
    assert len(head) == 96
    return struct.pack("<H", len(record)) + record


def event_seeds():
    t = "fuzz_event_to_output"
    syms = [
        (1, symbol((b"Worker", 1), (b"spin", 1), (b"/srv/app.py", 1), 25)),
        (2, symbol((b"", 0), ("größe_计算".encode("utf-16-le"), 2),
                   (b"/usr/lib/python3.11/threading.py", 1), 988)),
        (3, symbol((b"", 0), ("\U0001F40D".encode("utf-32-le"), 4),
                   ("/🐍/app.py".encode("utf-32-le")[:256], 4, 40), 7)),
        (4, symbol((b"Old\xff", 8), (b"caf\xc3\xa9\xe2\x82", 8), (b"x" * 256, 8, 300), 1)),
        (5, symbol((b"", 0), (b"", 255), (b"<frozen importlib._bootstrap>", 1), 1)),
    ]
    sym_bytes = struct.pack("<B", len(syms)) + b"".join(struct.pack("<i", i) + s
                                                        for i, s in syms)
    # A 3.10-style line table: (length, delta) pairs; 3.11 location entries.
    linetable310 = bytes([4, 1, 6, 2, 8, 0x80, 2, 255])
    locations = bytes([0x80 | (13 << 3) | 1, 0x04, 0x80 | (10 << 3) | 3, 0x80 | (14 << 3), 0x05,
                       0x80 | (15 << 3) | 2])
    kstacks = struct.pack("<B", 1) + struct.pack("<iB", 5, 3) + struct.pack(
        "<QQQ", 0xffffffff81002010, 0xffffffff81001100, 0xffffffff81003000)
    frames = [(3, 4, 1), (2, 10, 1), (1, -1, 0)]
    events = (event(1240, b"python3", frames, kernel_stack_id=5) +
              event(1241, b"worker;x\n\xff", [(4, 0, 1), (-2, 0, 0), (-1, 0, 0)], error=3,
                    truncated=1) +
              event(1242, b"python3", frames, mm=0x1000) +
              event(1242, b"python3", frames, mm=0x2000, kernel_stack_id=-17) +
              struct.pack("<H", 100) + b"\x01" * 100 +
              event(1243, b"t", [(1, 2, 1)], ip=0x401000, sp=0x7ffd0000, user_stack_start=0x7ffcfff8,
                    user_stack=bytes(range(64)), generation=1, kernel_stack_id=5) +
              # Entries: a 3.11 entry frame, and a 3.12+ shim 0x40 above sp.
              event(1244, b"i", frames, ip=0x401000, sp=0x7ffd0000, user_stack_start=0x7ffcfff8,
                    user_stack=bytes(range(64)), entries=(0, 1, 0x42), stack_cut=1) +
              # --async-tasks: a chain of three (a str name, a default Task-<n>,
              # a name cut short), its root end too deep; one with a lost coroutine.
              event(1245, b"loop", frames, tasks=(task(1, b"request-7"), task(2, name_kind=2,
                                                                            number=12),
                                                  task(3, b"r\xc3\xa9q" * 30, encoding=8)),
                    task_error=1, task_frame=2) +
              event(1245, b"loop", frames, tasks=(task(-1, b"x"),), task_error=2, task_frame=9))
    for name, flags, version, table in (("lines_first_311", 0, 6, locations),
                                         ("lines_current_311", 1 | 4 | 8, 6, locations),
                                         ("lines_current_310_native", 1 | 2 | 4, 5, linetable310),
                                         ("interleaved_311", 2 | 16, 6, locations),
                                         ("async_tasks_314", 2 | 32, 9, locations),
                                         ("lines_current_27", 1, 0, bytes([2, 1, 4, 1, 10, 3]))):
        write(t, "seed_" + name,
              bytes([flags, version]) + sym_bytes + struct.pack("<H", len(table)) + table +
              kstacks + events)
    write(t, "seed_empty", b"")


# --- fuzz_native_unwind -------------------------------------------------------

def native_seeds():
    t = "fuzz_native_unwind"
    words = struct.pack("<8Q", 0x10, 0x20, 0, 0x1000, 0x30, 0, 0, 0)
    relocs = struct.pack("<H", 3) + struct.pack("<HB", 0, 0) + struct.pack("<HB", 1, 1) + \
        struct.pack("<HB", 3, 0xff)
    for flags, name in ((0, "live_self"), (1, "recording"), (3, "missing_pid"),
                        (4 | 1, "small_unwinder"), (4 | 8 | 1, "from_scratch"),
                        (0x10 | 0x40 | 0x80, "evict_key_forget"), (0x20, "absolute_ip")):
        head = bytes([flags])
        head += struct.pack("<Q", 0x401000) if flags & 0x20 else struct.pack("<BI", 2, 0x40)
        head += struct.pack("<HH", 0, 4)
        if flags & 0x40:
            head += struct.pack("<Q", 0xffff888000000000)
        write(t, "seed_" + name, head + relocs + words)
    extra = b"7f0000000000-7f0000001000 r-xp 00000000 00:00 0 /no/such/file.so\n" \
            b"garbage line\n"
    write(t, "seed_extra_maps", bytes([2]) + struct.pack("<BI", 0, 0x10) +
          struct.pack("<HH", 0, 0) + struct.pack("<H", len(extra)) + extra + relocs + words)
    write(t, "seed_empty", b"")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--python-roots", default="/var/cache/bcc-pyperf/roots")
    args = parser.parse_args()
    native_seeds()
    event_seeds()
    elf_seeds(args.python_roots)


if __name__ == "__main__":
    main()
