"""Busy threads with known, stable splits of their CPU time between leaf
functions, for tests/cc/test_e2e_sampling_oracle.cc, which profiles this
process with PyPerf and with CPython's own sampling profiler at once.

Usage: python3 oracle_threads.py

Three threads loop forever, each in pure bytecode:
  oracle-solo   always in alpha
  oracle-pair   beta_short for one unit of work, then beta_long for three
  oracle-trio   gamma_one for one unit, gamma_two for two, gamma_three for two
A unit is a fixed number of loop iterations of the same cost (a fraction of
a millisecond), so the split within a thread is a split of its CPU time
(25/75, 20/40/40) whatever the machine's load or the GIL's switching; only how
much each thread runs in all depends on them.
The main thread only waits.

Before "ready" it prints one line per thread,
  thread <name> <native id> <ident>
the native id being the thread's id in this process's PID namespace.
"""
import sys
import threading

# Iterations of one unit of work.
UNIT = 20000


def alpha(units):
    x = 0
    for i in range(units * UNIT):
        x ^= i
    return x


def beta_short(units):
    x = 0
    for i in range(units * UNIT):
        x ^= i
    return x


def beta_long(units):
    x = 0
    for i in range(units * UNIT):
        x ^= i
    return x


def gamma_one(units):
    x = 0
    for i in range(units * UNIT):
        x ^= i
    return x


def gamma_two(units):
    x = 0
    for i in range(units * UNIT):
        x ^= i
    return x


def gamma_three(units):
    x = 0
    for i in range(units * UNIT):
        x ^= i
    return x


# Per thread: (leaf, units) run in turn, forever.
PLANS = {
    "oracle-solo": [(alpha, 4)],
    "oracle-pair": [(beta_short, 1), (beta_long, 3)],
    "oracle-trio": [(gamma_one, 1), (gamma_two, 2), (gamma_three, 2)],
}


def worker(plan, started, ids, name):
    ids[name] = (threading.get_native_id(), threading.get_ident())
    for leaf, units in plan:
        leaf(units)
    started.release()
    while True:
        for leaf, units in plan:
            leaf(units)


def main():
    started = threading.Semaphore(0)
    ids = {}
    for name, plan in PLANS.items():
        threading.Thread(target=worker, args=(plan, started, ids, name), name=name,
                         daemon=True).start()
    for _ in PLANS:
        started.acquire()
    for name in PLANS:
        native_id, ident = ids[name]
        sys.stdout.write("thread %s %d %d\n" % (name, native_id, ident))
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    threading.Event().wait()


main()
