"""PyPerf's demo workload: a small "web service" doing CPU work in Python and
in C extensions, so a profile shows Python frames, native frames (zlib, json)
and kernel frames. Runs until killed."""
import hashlib
import json
import threading
import zlib


class RequestHandler(object):
    def __init__(self, payload):
        self.payload = payload

    def handle(self):
        body = self.render()
        return self.compress(body)

    def render(self):
        return json.dumps({"items": [self.payload] * 50, "total": len(self.payload)})

    def compress(self, body):
        return zlib.compress(body.encode(), 9)


def checksum_worker():
    data = b"x" * 65536
    while True:
        hashlib.sha256(data).hexdigest()


def fibonacci(n):
    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)


def serve_forever():
    handler = RequestHandler({"name": "demo", "values": list(range(100))})
    while True:
        handler.handle()
        fibonacci(15)


if __name__ == "__main__":
    t = threading.Thread(target=checksum_worker, name="checksum")
    t.daemon = True
    t.start()
    serve_forever()
