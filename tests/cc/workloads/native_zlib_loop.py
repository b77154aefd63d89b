"""A workload that spends its time in C: zlib.compress in a loop, for PyPerf's
native-frame end-to-end tests.

Threads:
  main thread   compress_loop: zlib.compress of a ~1 MiB random-ish buffer at
                level 9, again and again (deflate's longest-match search)
  syscall-loop  read_loop: os.read of /dev/zero, so samples also carry
                kernel frames under the native ones

Runs until killed. Prints "ready" once both threads are running.
"""
import os
import random
import sys
import threading
import zlib

BUFFER_BYTES = 1 << 20


def make_buffer():
    # Random bytes folded onto a 16-letter alphabet: compressible, but with no
    # long repeats, so level 9 works hard in deflate's match search.
    raw = random.Random(7).getrandbits(8 * BUFFER_BYTES).to_bytes(BUFFER_BYTES, "little")
    alphabet = b"etaoinshrdlucmfw"
    table = bytes(alphabet[i % len(alphabet)] for i in range(256))
    return raw.translate(table)


def read_loop():
    fd = os.open("/dev/zero", os.O_RDONLY)
    while True:
        os.read(fd, 1 << 16)


def compress_loop(data):
    while True:
        zlib.compress(data, 9)


if __name__ == "__main__":
    data = make_buffer()
    zlib.compress(data, 9)
    t = threading.Thread(target=read_loop, name="syscall-loop")
    t.daemon = True
    t.start()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    compress_loop(data)
