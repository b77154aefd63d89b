"""Keeps defining new functions, for PyPerf's symbol-map aging test
(test_e2e_symbol_aging.cc): fresh_0, fresh_1, ... each made with exec, called
once, running about 1 ms of CPU time, then dropped. Every sample names a
function no earlier sample named, so a symbol map that never let go of
entries would be full after as many samples as it has entries.

Prints "ready" first, then "made N" after every 1000 functions. Python 3.
"""
import sys
import time

SOURCE = """
def fresh_%d(spin_until):
    while time.process_time() < spin_until:
        pass
"""


def make(index):
    namespace = {}
    exec(SOURCE % index, {"time": time}, namespace)
    return namespace["fresh_%d" % index]


sys.stdout.write("ready\n")
sys.stdout.flush()
made = 0
while True:
    make(made)(time.process_time() + 0.001)
    made += 1
    if made % 1000 == 0:
        sys.stdout.write("made %d\n" % made)
        sys.stdout.flush()
