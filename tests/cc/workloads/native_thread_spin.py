"""A Python process with a thread the interpreter knows nothing about, for
PyPerf's no-thread-state counter test: argv[1] is the library built from
native_thread_spin.cc, whose pyperf_e2e_start_native_thread() starts a thread
that spins in C without ever entering Python (so it has no PyThreadState).
The main thread spins in Python meanwhile.

Runs until killed. Prints "native-tid <tid>" and then "ready" once both run.
"""
import ctypes
import sys


def python_spin():
    while True:
        x = 0
        for i in range(10000):
            x += i


if __name__ == "__main__":
    library = ctypes.CDLL(sys.argv[1])
    start = library.pyperf_e2e_start_native_thread
    start.restype = ctypes.c_long
    tid = start()
    sys.stdout.write("native-tid %d\nready\n" % tid)
    sys.stdout.flush()
    python_spin()
