"""Almost all of its time in one system call from one call site: os.readv
of 16 MiB from /dev/urandom into one preallocated buffer, in a loop. Each
call spends tens of milliseconds in the kernel's random number generator and
about a microsecond in Python, and allocates nothing (no malloc or mmap paths
that vary with the heap's state). Interrupted in the kernel, its user stack
is the same few return addresses every time, so which (file, offset)s its
native frames sit at does not depend on chance: PyPerf's native-cache
sharing test (test_e2e_native.cc) needs that.

The call site runs WARM_UP times with a small buffer before "ready": CPython
3.11 and later specialize a call after some executions (and then call
os_readv directly from the eval loop, with no vectorcall frames between),
so every process of this script is past that before it is sampled.
Python 3.
"""
import os
import sys

WARM_UP = 1000

fd = os.open("/dev/urandom", os.O_RDONLY)
small = [bytearray(64)]
large = [bytearray(16 << 20)]
calls = 0
while 1:
    os.readv(fd, small if calls < WARM_UP else large)
    calls += 1
    if calls == WARM_UP:
        sys.stdout.write("ready\n")
        sys.stdout.flush()
