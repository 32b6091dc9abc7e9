"""Somebody else's site for the widget's browser tests: a page on its own port (origin) that embeds the widget."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler

from tests.support.http_stub import StubServer


class HostPage:
    """Somebody else's site: one page that embeds the widget with a script tag, on its own port (origin)."""

    def __init__(self, token: str):
        self.token = token
        self.app_url = ""  # set once the app runs (its config must name this page's origin first)
        host = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                html = (
                    "<!doctype html><html><meta charset='utf-8'><title>host</title><body><h1>Host page</h1>"
                    f'<script src="{host.app_url}/widget.js" data-token="{host.token}"></script></body></html>'
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(html)))
                self.end_headers()
                self.wfile.write(html)

            def log_message(self, *args):
                pass

        self.server = StubServer(Handler).start()
        self.origin = self.server.base

    def close(self):
        self.server.stop()
