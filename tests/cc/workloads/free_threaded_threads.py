# -*- coding: utf-8 -*-
"""Eight CPU-busy threads at once in a free-threaded CPython (3.13t), for
tests/cc/test_e2e_free_threaded.cc.

Usage: python3.13t free_threaded_threads.py

Thread i runs worker_<i> -> <its leaf> forever, each leaf a different
computation: seven in pure bytecode, and kernel_reads, which reads
/dev/urandom (about a millisecond of kernel work per 1 MiB read), so its
samples carry kernel frames. The leaves' names cover every CPython string
kind (ASCII, Latin-1, UCS-2 with Greek and CJK, UCS-4). With no GIL all
eight run in parallel. The main thread meanwhile starts short-lived
threads one after another, each running churn_worker -> churn_leaf for about
0.2 s, so threads start and end while PyPerf runs. Prints "ready" once every
busy thread is in its leaf.
"""
import os
import sys
import threading
import time


def spin_ascii(started):  # sums integers
    started.release()
    x = 0
    while True:
        for i in range(1000):
            x += i


def größe(started):  # Latin-1; a 32-bit FNV-style hash
    started.release()
    h = 2166136261
    while True:
        for i in range(1000):
            h = ((h ^ i) * 16777619) & 0xFFFFFFFF


def grüße_λ(started):  # UCS-2 (Greek); a float recurrence
    started.release()
    y = 1.0
    while True:
        for i in range(1000):
            y = y * 0.5 + i


def 计算_线程(started):  # UCS-2 (CJK); counts with a branch
    started.release()
    n = 0
    while True:
        for i in range(1000):
            if i % 3 == 0:
                n += 1
            else:
                n -= 1


def 𠀀𠀁_spin(started):  # UCS-4; walks the characters of a string
    started.release()
    text = "abracadabra" * 20
    while True:
        k = 0
        for c in text:
            if c == "a":
                k += 1


def busy_five(started):  # squares the items of a tuple
    started.release()
    values = tuple(range(50))
    while True:
        s = 0
        for v in values:
            s += v * v


def busy_six(started):  # rotates a 16-bit word
    started.release()
    b = 1
    while True:
        for _ in range(1000):
            b = ((b << 1) | (b >> 15)) & 0xFFFF


def kernel_reads(started):  # reads /dev/urandom: most of its time in the kernel
    started.release()
    fd = os.open("/dev/urandom", os.O_RDONLY)
    while True:
        os.read(fd, 1 << 20)


def worker_0(started): spin_ascii(started)
def worker_1(started): größe(started)
def worker_2(started): grüße_λ(started)
def worker_3(started): 计算_线程(started)
def worker_4(started): 𠀀𠀁_spin(started)
def worker_5(started): busy_five(started)
def worker_6(started): busy_six(started)
def worker_7(started): kernel_reads(started)


WORKERS = [worker_0, worker_1, worker_2, worker_3, worker_4, worker_5, worker_6, worker_7]


def churn_leaf(until):
    x = 0
    while time.monotonic() < until:
        for i in range(1000):
            x += i


def churn_worker():
    churn_leaf(time.monotonic() + 0.2)


def main():
    if sys._is_gil_enabled():
        sys.stderr.write("the GIL is enabled: not a free-threaded run\n")
        sys.exit(2)
    started = threading.Semaphore(0)
    for worker in WORKERS:
        threading.Thread(target=worker, args=(started,), daemon=True).start()
    for _ in WORKERS:
        started.acquire()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        t = threading.Thread(target=churn_worker, daemon=True)
        t.start()
        t.join()


main()
