"""A local webhook receiver for the hand-off tests (and any test that needs one)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler

from tests.support.http_stub import StubServer


class Hook:
    """A local webhook receiver: records each JSON body and its headers; scripted statuses and hangs per request
    (a 3xx redirects to ``/moved``, whose GET answers 200 and is counted in ``gets``)."""

    def __init__(self, script: list[object] | None = None):
        self.script = list(script or [])  # per request: an HTTP status, or "hang"
        self.received: list[tuple[dict, dict]] = []
        self.gets: list[str] = []
        self.release = threading.Event()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                step = hook.script.pop(0) if hook.script else 200
                hook.received.append((json.loads(body), {**dict(self.headers), "raw": body}))
                if step == "hang":
                    hook.release.wait(10)
                    return
                self.send_response(int(step))  # type: ignore[call-overload]
                if 300 <= int(step) < 400:  # type: ignore[call-overload]
                    self.send_header("Location", "/moved")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def do_GET(self):
                hook.gets.append(self.path)
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = StubServer(Handler).start()
        self.url = f"{self.server.base}/hook/secret-path-token"

    def close(self):
        self.release.set()
        self.server.stop()
