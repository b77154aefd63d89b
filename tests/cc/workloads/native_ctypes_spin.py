"""Calls into a C++ shared library through ctypes, for PyPerf's native-frame
end-to-end tests: argv[1] is the library built from native_cxx_spin.cc, whose
extern "C" pyperf_e2e_spin(rounds) runs pyperf_e2e::Spinner::spin(int).

Runs until killed. Prints "ready" once the library is loaded and has run once.
"""
import ctypes
import sys


def call_spin(spin):
    while True:
        spin(200000)


if __name__ == "__main__":
    library = ctypes.CDLL(sys.argv[1])
    spin = library.pyperf_e2e_spin
    spin.argtypes = [ctypes.c_int]
    spin.restype = ctypes.c_long
    spin(1)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    call_spin(spin)
