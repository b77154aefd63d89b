"""Names right at and just past PyPerf's BPF buffers, for
tests/cc/test_e2e_long_names.cc.

Usage: python long_names.py BASE_DIR     (BASE_DIR: an ASCII path of at
most 200 bytes)

The buffers (examples/cpp/pyperf/PyPerfBpfShared.h) hold a class name of 32
bytes with its terminating NUL (tp_name is a C string), a function name of
64 bytes and a file name of 256 bytes (the str's characters, one byte each
here: every name is ASCII). Writes two source files,
  BASE_DIR/aaa...a.py   a path of exactly 256 bytes     (fits)
  BASE_DIR/bbb...b.py   a path of exactly 257 bytes     (one byte too long)
and runs, in the main thread, this chain forever (root first; the line is
co_firstlineno):
  f64_fff...f                     a.py:1   a function name of 64 characters
  f65_ggg...g                     b.py:1   65 characters
  C31_hhh...h.method              a.py:5   a class name of 31 bytes
  C32_iii...i.spin                b.py:5   32 bytes; the leaf, busy
Prints "ready" once the leaf runs. Written for Python 2.7 and 3.x alike.
"""
import os
import sys

FUNCTION_FITS = "f64_" + "f" * 60
FUNCTION_TOO_LONG = "f65_" + "g" * 61
CLASS_FITS = "C31_" + "h" * 27
CLASS_TOO_LONG = "C32_" + "i" * 28


def path_of_length(base, letter, length):
    """BASE/<letter...>.py, `length` bytes long."""
    name = letter * (length - len(base) - len("/.py"))
    return os.path.join(base, name + ".py")


def load(path, source):
    """Writes `source` to `path` and runs it as its module; returns its globals."""
    with open(path, "w") as f:
        f.write(source)
    namespace = {"__name__": "long_names"}
    exec(compile(source, path, "exec"), namespace)
    return namespace


def ready():
    sys.stdout.write("ready\n")
    sys.stdout.flush()


def main():
    base = sys.argv[1]
    a = load(path_of_length(base, "a", 256),
             "def %s():\n"
             "    return NEXT_FUNCTION()\n"
             "\n"
             "class %s(object):\n"
             "    def method(self):\n"
             "        return NEXT_METHOD()\n" % (FUNCTION_FITS, CLASS_FITS))
    b = load(path_of_length(base, "b", 257),
             "def %s():\n"
             "    return NEXT_FUNCTION()\n"
             "\n"
             "class %s(object):\n"
             "    def spin(self):\n"
             "        READY()\n"
             "        while True:\n"
             "            pass\n" % (FUNCTION_TOO_LONG, CLASS_TOO_LONG))
    # Each link calls the next through its module's globals: no frame between.
    a["NEXT_FUNCTION"] = b[FUNCTION_TOO_LONG]
    b["NEXT_FUNCTION"] = a[CLASS_FITS]().method
    a["NEXT_METHOD"] = b[CLASS_TOO_LONG]().spin
    b["READY"] = ready
    a[FUNCTION_FITS]()


if __name__ == "__main__":
    main()
