"""Threads that keep exiting and being replaced, for PyPerf's thread-state
cache test. Two at a time run; each names itself (the kernel's comm, through
prctl) "even" or "odd" after the function it runs, spins in it for about
20 ms and exits. glibc reuses an exited thread's stack (and so its
pthread_self) and CPython its PyThreadState memory, so a cache that trusted a
stale entry would show one kind's frames under the other's name. As root,
each new pair also takes the first pair's two tids again, in turn the other
way round (through /proc/sys/kernel/ns_last_pid; another fork on the host may
take one first now and then): PyPerf caches thread states by tid, so the
entry of a tid names the state of the other kind's exited thread. Prints
"ready" once the first threads run."""
import ctypes
import sys
import threading
import time

PR_SET_NAME = 15
libc = ctypes.CDLL(None)


def name_thread(name):
    libc.prctl(PR_SET_NAME, ctypes.c_char_p(name.encode()), 0, 0, 0)


def spin_for(seconds):
    end = time.time() + seconds
    x = 0
    while time.time() < end:
        x = (x + 1) & 0xFF


def even_work():
    name_thread("even")
    spin_for(0.02)


def odd_work():
    name_thread("odd")
    spin_for(0.02)


def take_tid_next(tid):
    """Makes `tid` the next one the kernel hands out, if it is free."""
    try:
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(tid - 1))
    except OSError:
        pass  # not root: tids are not reused, the test still holds


def main():
    started = 0
    tids = None
    while True:
        pair = [threading.Thread(target=even_work), threading.Thread(target=odd_work)]
        if started % 2:
            pair.reverse()  # each kind takes the other's tid and stack in turn
        for i, t in enumerate(pair):
            if tids:
                take_tid_next(tids[i])
            t.start()
        if tids is None:
            tids = [t.native_id for t in pair]
        if started == 0:
            sys.stdout.write("ready\n")
            sys.stdout.flush()
        for t in pair:
            t.join()
        started += 1


if __name__ == "__main__":
    main()
