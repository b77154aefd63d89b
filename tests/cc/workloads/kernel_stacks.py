"""Many distinct kernel stacks, each thread in a system call of its own, for
tests/cc/test_e2e_kernel_stacks.cc.

Threads (each busy forever, its Python leaf naming its system call):
  read_loop      read() of 1 MiB from /dev/zero     __x64_sys_read
  getrandom_loop os.urandom(64 KiB)                 __x64_sys_getrandom
  stat_loop      os.stat() of a path 30 dirs deep   __x64_sys_newfstatat / statx
  write_loop     write() of 1 MiB to /dev/null      __x64_sys_write
Interrupted anywhere in those calls, they leave more distinct kernel stacks
than a small map holds, and no thread ever makes another one's call: a
thread's kernel frames that name another thread's call are another sample's.
Usage: python kernel_stacks.py DIR    (stat_loop's path is made under DIR)

Runs until killed; prints "ready" once every thread runs. Python 3.
"""
import os
import sys
import threading

BUFFER = 1 << 20


def read_loop():
    fd = os.open("/dev/zero", os.O_RDONLY)
    while True:
        os.read(fd, BUFFER)


def getrandom_loop():
    while True:
        os.urandom(1 << 16)


def stat_loop(path):
    while True:
        os.stat(path)


def write_loop():
    fd = os.open("/dev/null", os.O_WRONLY)
    data = b"x" * BUFFER
    while True:
        os.write(fd, data)


def main():
    deep = os.path.join(sys.argv[1], *(["d"] * 30))
    os.makedirs(deep)
    workers = [(read_loop, ()), (getrandom_loop, ()), (stat_loop, (deep,)), (write_loop, ())]
    for target, args in workers:
        t = threading.Thread(target=target, args=args, name=target.__name__)
        t.daemon = True
        t.start()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    threading.Event().wait()


if __name__ == "__main__":
    main()
