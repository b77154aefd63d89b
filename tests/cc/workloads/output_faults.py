"""A workload for tests/cc/test_e2e_output_faults.cc: one thread, busy at the
bottom of a deep stack of frames with long names, in phases the test moves
through.

Every sample's collapsed line is long (about 100 frames of some 170 bytes:
over 15 KB), so a single sample makes a dump bigger than a few pages of a
nearly full file system. The busy leaf is called from phase_<N>; SIGUSR1
moves to the next phase (phase_0 to phase_7, then it stays at phase_7), so a
test can tell which stretch of time a dumped sample comes from. Prints
"phase N" once phase N's leaf runs (and "ready" first, with "phase 0").

Usage: python output_faults.py      Written for Python 2.7 and 3.x alike.
"""
import signal
import sys

DEPTH = 100  # with the frames around it, under PyPerf's 128: nothing is cut
LAST_PHASE = 7

state = {"phase": 0}


def next_phase(signum, frame):
    state["phase"] = min(state["phase"] + 1, LAST_PHASE)


def spin(phase):
    sys.stdout.write("phase %d\n" % phase if phase else "ready\nphase 0\n")
    sys.stdout.flush()
    while state["phase"] == phase:
        x = 0
        for i in range(1000):
            x += i


def phase_0():
    spin(0)


def phase_1():
    spin(1)


def phase_2():
    spin(2)


def phase_3():
    spin(3)


def phase_4():
    spin(4)


def phase_5():
    spin(5)


def phase_6():
    spin(6)


def phase_7():
    spin(7)


PHASES = [phase_0, phase_1, phase_2, phase_3, phase_4, phase_5, phase_6, phase_7]


# A function name of 63 characters: PyPerf keeps it whole (up to 64 bytes).
def descend_through_a_frame_whose_long_name_makes_every_line_big_ab(depth):
    if depth > 0:
        return descend_through_a_frame_whose_long_name_makes_every_line_big_ab(depth - 1)
    return PHASES[state["phase"]]()


def main():
    signal.signal(signal.SIGUSR1, next_phase)
    while True:
        descend_through_a_frame_whose_long_name_makes_every_line_big_ab(DEPTH)


if __name__ == "__main__":
    main()
