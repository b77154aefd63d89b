"""A workload with a known call tree, for PyPerf's end-to-end tests.

Threads (each named so a failure is easy to read):
  main thread      module-level busy function        main_busy -> main_leaf
  worker-method    method of a class in a busy loop  Worker.run -> Worker.spin
  worker-cls       classmethod in a busy loop        Worker.class_spin
  syscall-loop     reads /dev/urandom in a loop      syscall_loop
  deep-recursion   recursion deeper than PyPerf's frame limit, busy at the bottom

Runs until killed. Written for Python 2.7 and 3.x alike. Prints "ready" once
every thread is running.
"""
import os
import sys
import threading

RECURSION_DEPTH = int(os.environ.get("CALLTREE_DEPTH", "200"))


class Worker(object):
    def run(self):
        while True:
            self.spin()

    def spin(self):
        # Long enough that samples between two calls (in run) stay rare.
        x = 0
        for i in range(100000):
            x += i
        return x

    @classmethod
    def class_spin(cls):
        while True:
            y = 0
            for i in range(10000):
                y += i


def syscall_loop():
    # /dev/urandom: about a millisecond of kernel work per read, without the
    # GIL, so most of this thread's samples are under the read. (A read of
    # /dev/zero is over in microseconds, and the thread's few samples were as
    # often in the buffer's allocation as in the kernel.)
    fd = os.open("/dev/urandom", os.O_RDONLY)
    while True:
        os.read(fd, 1 << 20)


def recurse(depth):
    if depth > 0:
        return recurse(depth - 1)
    return deep_leaf()


def deep_leaf():
    while True:
        z = 0
        for i in range(10000):
            z += i


def main_leaf():
    total = 0
    for i in range(10000):
        total += i
    return total


def main_busy():
    while True:
        main_leaf()


def start(target, name, *args):
    t = threading.Thread(target=target, name=name, args=args)
    t.daemon = True
    t.start()
    return t


if __name__ == "__main__":
    sys.setrecursionlimit(RECURSION_DEPTH + 1000)
    start(Worker().run, "worker-method")
    start(Worker.class_spin, "worker-cls")
    start(syscall_loop, "syscall-loop")
    start(recurse, "deep-recursion", RECURSION_DEPTH)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    main_busy()
