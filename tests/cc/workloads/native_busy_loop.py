"""The reference load of PyPerf's native cache: `while 1: pass` at module
level, so every sample is the interpreter's eval loop. Prints "ready" first.
"""
import sys

sys.stdout.write("ready\n")
sys.stdout.flush()
while 1:
    pass
