"""A WSGI app for PyPerf's uWSGI test (tests/cc/test_e2e_versions.cc).

uWSGI embeds CPython through its python3 plugin (a dlopen'ed plugin linked to
libpython3.X), so the profiled process is named uwsgi, not python. Loading
the app starts a thread with a known call tree, busy forever:

  uwsgi-crunch   Crunch.loop -> Crunch.step

and each request does the same work once (Crunch.step) before answering.
Prints "ready" on stdout once the thread runs.
"""
import sys
import threading


class Crunch(object):
    def loop(self):
        while True:
            self.step()

    def step(self):
        # A djb2 hash of a long string, one character at a time.
        h = 5381
        for c in "uwsgi-crunch" * 800:
            h = (h * 33 + ord(c)) & 0xFFFFFFFF
        return h


def application(environ, start_response):
    body = str(Crunch().step()).encode("ascii")
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [body]


def _start():
    t = threading.Thread(target=Crunch().loop, name="uwsgi-crunch")
    t.daemon = True
    t.start()
    sys.stdout.write("ready\n")
    sys.stdout.flush()


_start()
