"""A Python process with a thread the interpreter knows nothing about, for
PyPerf's no-thread-state counter test: argv[1] is the library built from
native_thread_spin.cc, whose pyperf_e2e_start_native_thread() starts a thread
that spins in C without ever entering Python (so it has no PyThreadState).
The main thread spins in Python meanwhile, calling callback_work() over and
over.

With "callbacks" after the library, the thread keeps entering Python instead:
pyperf_e2e_start_callback_thread() calls callback_work() (a ctypes callback:
CPython creates a PyThreadState for the call and deletes it after), spins
about 5 ms in C, and again; its thread has a PyThreadState only during the
calls.

Runs until killed. Prints "native-tid <tid>" and then "ready" once both run.
"""
import ctypes
import sys


def callback_work():
    # About 3 ms of Python, so samples land in it as well as between calls.
    x = 0
    for i in range(30000):
        x += i


CALLBACK = ctypes.CFUNCTYPE(None)
callback = CALLBACK(callback_work)  # kept alive: the thread calls it forever

if __name__ == "__main__":
    library = ctypes.CDLL(sys.argv[1])
    if len(sys.argv) > 2 and sys.argv[2] == "callbacks":
        start = library.pyperf_e2e_start_callback_thread
        start.argtypes = [CALLBACK]
        start.restype = ctypes.c_long
        tid = start(callback)
    else:
        start = library.pyperf_e2e_start_native_thread
        start.restype = ctypes.c_long
        tid = start()
    sys.stdout.write("native-tid %d\nready\n" % tid)
    sys.stdout.flush()
    while True:
        callback_work()
