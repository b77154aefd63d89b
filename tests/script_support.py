"""What the Python test scripts CTest runs (tests/gprofiler, tests/package)
share: how a test says it cannot run or has failed, and how that becomes the
exit status CTest reads: 0 passed, 1 failed, 77 skipped (SKIP_RETURN_CODE);
with PYPERF_TEST_STRICT=1 a skip is a failure.

Python 3 standard library only. A script in a folder below tests/ imports it
after putting tests/ on sys.path.
"""
import os
import sys
import time
import traceback

SKIP_EXIT = 77


class Skip(Exception):
    """The machine lacks what the test needs (a capability, a tool)."""


class Failure(AssertionError):
    pass


def strict():
    return os.environ.get("PYPERF_TEST_STRICT") == "1"


def log(message):
    sys.stdout.write(message + "\n")
    sys.stdout.flush()


def check(condition, message):
    if not condition:
        raise Failure(message)


def run(test, name):
    """Runs test() and returns the script's exit status, having logged the
    outcome (with the traceback of an unexpected exception)."""
    started = time.monotonic()
    try:
        test()
    except Skip as e:
        if strict():
            log("FAILED (skip under PYPERF_TEST_STRICT=1): %s" % e)
            return 1
        log("SKIPPED: %s" % e)
        return SKIP_EXIT
    except Failure as e:
        log("FAILED: %s" % e)
        return 1
    except Exception:
        log("FAILED with an exception:\n" + traceback.format_exc())
        return 1
    log("PASSED %s in %.1fs" % (name, time.monotonic() - started))
    return 0
