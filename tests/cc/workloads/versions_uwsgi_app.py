"""A WSGI app for PyPerf's uWSGI test (tests/cc/test_e2e_versions.cc).

uWSGI embeds CPython through its python3 plugin (a dlopen'ed plugin linked to
libpython3.X), so the profiled process is named uwsgi, not python. Loading
the app starts a thread with a known call tree, busy forever:

  uwsgi-crunch   Crunch.loop -> Crunch.step

and each request answers with the hash (Crunch.step) of its path.
Prints "ready" on stdout once the thread runs.
"""
import sys
import threading


# What the busy thread hashes: long enough that samples between two steps
# (in loop) stay rare.
BUSY_TEXT = "uwsgi-crunch" * 800


class Crunch(object):
    def loop(self):
        while True:
            self.step(BUSY_TEXT)

    def step(self, text):
        # A djb2 hash of text, one character at a time.
        h = 5381
        for c in text:
            h = (h * 33 + ord(c)) & 0xFFFFFFFF
        return h


def application(environ, start_response):
    body = str(Crunch().step(environ.get("PATH_INFO", "/"))).encode("ascii")
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [body]


def _start():
    t = threading.Thread(target=Crunch().loop, name="uwsgi-crunch")
    t.daemon = True
    t.start()
    sys.stdout.write("ready\n")
    sys.stdout.flush()


_start()
