"""Python that calls C that calls Python, for test_e2e_interleaved.cc (native
frames interleaved with Python frames, issue 36). Each chain runs on a thread
of its own, whose name (comm, set with prctl) says which:

  i_sorted  run_sorted -> sorted(key=) -> key_leaf -> spin
  i_resub   run_resub -> Pattern.sub(function) -> repl_leaf -> spin
  i_reduce  run_reduce -> functools.reduce -> reduce_leaf -> spin
  i_ctypes  run_ctypes -> libc qsort (ctypes) -> compare_leaf -> spin
  i_json    run_json -> json.dumps(default=) -> ... -> default_leaf -> spin
  i_ext     run_ext -> interleaved_ext.call_back (C: ext_call_back ->
            ext_level_two) -> ext_leaf -> interleaved_ext.spin (a C loop)
  i_deep    run_deep -> deep_level(DEEP) -> sorted(key=) -> deep_key ->
            deep_level(DEEP - 1) -> ... -> deep_level(0) -> spin: a C stack
            deeper than the test's copy of it
  i_cut     cut_outer -> cut_middle -> cut_spin, which cuts cut_middle's link
            to its caller (as corrupt_frames.py does) and spins: a Python
            chain that no longer pairs with the eval loop's C frames

Usage: interleaved_calls.py EXT_DIR CPU_SECONDS
Imports interleaved_ext from EXT_DIR, starts every thread, prints
"version MAJOR.MINOR" and "ready",
waits for SIGUSR1, lets the threads run until the process has used
CPU_SECONDS of CPU time, prints "done", then sleeps until killed (the cut
thread sleeps too: it never returns into its cut chain). Python 2.7 and 3.x.
"""
import ctypes
import functools
import json
import os
import re
import signal
import sys
import sysconfig
import threading
import time

DEEP = 50
SPIN = 300

libc = ctypes.CDLL(None)
# Whether the chains run, and whether they are done: plain flags, read with
# no Python call (threading.Event's methods are Python code, whose frames
# would show in every chain).
running = [False]
stopped = [False]


def name_thread(name):
    libc.prctl(15, ctypes.c_char_p(name.encode("ascii")), 0, 0, 0)  # PR_SET_NAME


def spin(n):
    x = 0
    for i in range(n):
        x += i
    return x


def gate():
    """Waits while the chains are not released; False once they are done."""
    while not running[0]:
        if stopped[0]:
            return False
        time.sleep(0.01)
    return not stopped[0]


def key_leaf(x):
    spin(SPIN)
    return x


def run_sorted():
    data = list(range(8))
    while gate():
        sorted(data, key=key_leaf)


def repl_leaf(match):
    spin(SPIN)
    return "y"


def run_resub():
    pattern = re.compile("x")
    while gate():
        pattern.sub(repl_leaf, "axbxcxdx")


def reduce_leaf(a, b):
    spin(SPIN)
    return a + b


def run_reduce():
    data = list(range(8))
    while gate():
        functools.reduce(reduce_leaf, data)


COMPARE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int),
                           ctypes.POINTER(ctypes.c_int))


def compare_leaf(a, b):
    spin(SPIN)
    return a[0] - b[0]


def run_ctypes():
    values = (ctypes.c_int * 8)(5, 3, 7, 1, 0, 6, 2, 4)
    compare = COMPARE(compare_leaf)
    libc.qsort.restype = None
    while gate():
        libc.qsort(values, len(values), ctypes.sizeof(ctypes.c_int), compare)


class Opaque(object):
    pass


def default_leaf(obj):
    spin(SPIN)
    return 1


def run_json():
    items = [Opaque() for _ in range(8)]
    while gate():
        json.dumps(items, default=default_leaf)


ext = []  # the module, once main imported it


def ext_leaf():
    return ext[0].spin(20000)


def run_ext():
    while gate():
        ext[0].call_back(ext_leaf, 4)


def deep_key(n):
    return deep_level(n - 1)


def deep_level(n):
    if n == 0:
        return spin(SPIN)
    return sorted([n], key=deep_key)


def run_deep():
    while gate():
        deep_level(DEEP)


PTR = ctypes.sizeof(ctypes.c_void_p)


# PyObject_HEAD's words: 4 in a free-threaded build (ob_tid, the flags and
# local count, ob_ref_shared, ob_type), else 2.
HEAD = 4 if sysconfig.get_config_var("Py_GIL_DISABLED") else 2


def caller_link_address(frame):
    """The address of the word holding `frame`'s link to its caller (the
    layouts of CPython's own headers; corrupt_frames.py has the same)."""
    if sys.version_info < (3, 11):
        return id(frame) + 3 * PTR  # PyObject_VAR_HEAD, then f_back
    # PyFrameObject: PyObject_HEAD, f_back, f_frame -> _PyInterpreterFrame
    interpreter_frame = ctypes.c_void_p.from_address(id(frame) + (HEAD + 1) * PTR).value
    if sys.version_info < (3, 12):
        return interpreter_frame + 6 * PTR  # ..., frame_obj, previous
    return interpreter_frame + 1 * PTR  # f_executable, previous


def cut_spin():
    middle = sys._getframe(1)
    ctypes.c_size_t.from_address(caller_link_address(middle)).value = 0
    del middle
    while not stopped[0]:
        if running[0]:
            spin(SPIN)
        else:
            time.sleep(0.01)
    while True:  # never back into the cut chain
        time.sleep(1)


def cut_middle():
    cut_spin()


def cut_outer():
    cut_middle()


CHAINS = [
    ("i_sorted", run_sorted), ("i_resub", run_resub), ("i_reduce", run_reduce),
    ("i_ctypes", run_ctypes), ("i_json", run_json), ("i_ext", run_ext),
    ("i_deep", run_deep), ("i_cut", cut_outer),
]


def chain_thread(name, function):
    name_thread(name)
    function()


def released(signum, frame):
    running[0] = True


def cpu_seconds_used():
    times = os.times()
    return times[0] + times[1]


def main():
    sys.path.insert(0, sys.argv[1])
    cpu_seconds = float(sys.argv[2])
    sys.setrecursionlimit(1000 + 4 * DEEP)
    import interleaved_ext  # fails here, before "ready", if it was not built
    ext.append(interleaved_ext)
    signal.signal(signal.SIGUSR1, released)
    threads = []
    for name, function in CHAINS:
        thread = threading.Thread(target=chain_thread, args=(name, function))
        thread.daemon = True
        thread.start()
        threads.append(thread)
    sys.stdout.write("version %d.%d\nready\n" % sys.version_info[:2])
    sys.stdout.flush()
    while not running[0]:
        time.sleep(0.02)
    start = cpu_seconds_used()
    while cpu_seconds_used() - start < cpu_seconds:
        time.sleep(0.05)
    stopped[0] = True
    running[0] = False
    sys.stdout.write("done\n")
    sys.stdout.flush()
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main()
