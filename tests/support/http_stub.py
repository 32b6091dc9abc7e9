"""One way to run a stand-in HTTP server in a test: a ThreadingHTTPServer on 127.0.0.1, on a port the OS picks,
serving a handler class from a daemon thread until stopped (the LLM, webhook, WeCom, embeddings and host-page
stand-ins all use it)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address):  # clients that time out close sockets; not a test failure
        pass


class StubServer:
    """A stand-in server: ``start()`` serves ``handler`` in the background, ``stop()`` closes it; ``base`` is its
    ``http://127.0.0.1:<port>``. ``quiet`` drops the tracebacks of clients that hang up mid-request."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], quiet: bool = False):
        self.httpd = (_QuietServer if quiet else ThreadingHTTPServer)(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True  # a handler left waiting (a scripted hang) does not hold the process
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base(self) -> str:
        """The server's origin, e.g. ``http://127.0.0.1:50123``."""
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def start(self) -> StubServer:
        """Serve in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.httpd.shutdown()
        self.httpd.server_close()
