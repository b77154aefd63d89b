# Waits, using no CPU, until a line arrives on the FIFO argv[1], then execs
# argv[2:] (tests/cc/test_e2e_exec.cc): a process PyPerf has inspected but
# never sampled becomes another program. Prints "ready PID" first, PID being
# the process that will exec. With --fork before the FIFO, a forked child
# waits and execs while the parent waits for it, as gProfiler's helpers are
# started.
#   exec_when_told.py [--fork] FIFO PROGRAM [ARGS...]
import os
import sys


def wait_then_exec(fifo, argv):
    with open(fifo) as f:  # blocks until the test opens it for writing
        f.readline()
    os.execv(argv[0], argv)


def main(args):
    fork = args[0] == "--fork"
    if fork:
        args = args[1:]
    fifo, argv = args[0], args[1:]
    if not fork:
        print("ready %d" % os.getpid(), flush=True)
        wait_then_exec(fifo, argv)
    child = os.fork()
    if child == 0:
        wait_then_exec(fifo, argv)
    print("ready %d" % child, flush=True)
    os.waitpid(child, 0)


main(sys.argv[1:])
