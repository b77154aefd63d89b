"""Many threads for PyPerf's thread-lookup test. CPython links new thread
states at the head of the interpreter's list, so the threads started first sit
deepest in it: a busy thread started before N (default 300) sleeping threads,
and the main thread, busy after starting them all. Prints "ready"."""
import os
import sys
import threading
import time

N = int(os.environ.get("THREADS", "300"))


def sleeper():
    while True:
        time.sleep(0.5)


def busy_first_thread():
    # Powers of 3 modulo a prime.
    a = 1
    while True:
        a = (a * 3) % 1000003


def main_spin():
    # A countdown restarted forever.
    n = 0
    while True:
        n = n - 1 if n > 0 else 100000


if __name__ == "__main__":
    t = threading.Thread(target=busy_first_thread, name="busy-first")
    t.daemon = True
    t.start()
    for _ in range(N):
        s = threading.Thread(target=sleeper)
        s.daemon = True
        s.start()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    main_spin()
