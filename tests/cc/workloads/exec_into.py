# Runs before_exec_spin until the file argv[3] exists, then execs the
# interpreter argv[2] on this script, which then runs after_exec_spin: the
# same pid, another program (tests/cc/test_e2e_exec.cc).
#   exec_into.py first PYTHON TRIGGER_FILE
import os
import sys


def before_exec_spin(trigger):
    n = 0
    while True:
        n += 1
        if n % 100000 == 0 and os.path.exists(trigger):
            return


def after_exec_spin():
    while True:
        pass


if sys.argv[1] == "first":
    print("ready", flush=True)
    before_exec_spin(sys.argv[3])
    os.execv(sys.argv[2], [sys.argv[2], os.path.abspath(__file__), "second"])
else:
    after_exec_spin()
