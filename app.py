"""Serve the knowledge-base chat in the browser, and the OpenAI-compatible API at /v1 on the same port.

``python app.py [--config PATH] [--host H] [--port P] [--share]`` — the same as ``python -m bot serve``; the server
itself is bot/server.py.
"""

from __future__ import annotations

from bot.server import build_server, create_app, main, parse_args, serve

__all__ = ["build_server", "create_app", "main", "parse_args", "serve"]

if __name__ == "__main__":
    main()
