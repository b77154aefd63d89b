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
        x = 0
        for i in range(10000):
            x += i
        return x


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
