"""Starts COUNT short-lived Python processes evenly over SECONDS, for PyPerf's
churn test and bench/soak: each runs one of the interpreters named after the
two numbers (in turn), sleeps 1.2 s in churn_child() (long enough for
PyPerf's next rescan to find it), spins about 30 ms and exits. Prints
"ready" before the first, "started N" once a second, and "done N" after the
last has exited. With SECONDS = 0 it keeps going until killed, at COUNT a
second."""
import subprocess
import sys
import time

CHILD = """
import time
def churn_child():
    time.sleep(1.2)
    end = time.time() + 0.03
    x = 0
    while time.time() < end:
        x += 1
churn_child()
"""


def main():
    count, seconds = int(sys.argv[1]), float(sys.argv[2])
    interpreters = sys.argv[3:]
    forever = seconds == 0
    interval = 1.0 / count if forever else seconds / count
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    running = []
    started = 0
    start = time.time()
    last_report = start
    while forever or started < count:
        due = start + started * interval
        now = time.time()
        if now < due:
            time.sleep(min(due - now, 0.05))
        else:
            python = interpreters[started % len(interpreters)]
            running.append(subprocess.Popen([python, "-c", CHILD]))
            started += 1
        running = [p for p in running if p.poll() is None]
        if time.time() - last_report >= 1:
            last_report = time.time()
            sys.stdout.write("started %d\n" % started)
            sys.stdout.flush()
    for p in running:
        p.wait()
    sys.stdout.write("done %d\n" % started)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
