"""Large request bodies sent as an attacker would: chunked, with no declared length, stopping when the server answers
(tests and benchmarks)."""

from __future__ import annotations

import json
import select
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

CHUNK = 64 * 1024


@dataclass(frozen=True)
class Streamed:
    """What became of one streamed body: the server's status (None when it answered nothing) and the bytes sent."""

    status: int | None
    reply: bytes
    sent: int


def chat_fn_index(base: str) -> int:
    """The fn_index of the page's ``chat`` event (its inputs: message, history, mode, turns, categories)."""
    deps = httpx.get(base + "/config", timeout=30).json()["dependencies"]
    return next(d["id"] for d in deps if d.get("api_name") == "chat")


def chat_join_body(fn_index: int, session: str = "attacker01", history: list | None = None) -> tuple[bytes, bytes]:
    """(prefix, suffix) of a valid ``/gradio_api/queue/join`` body for the chat event: the message goes between."""
    rest = json.dumps({"fn_index": fn_index, "session_hash": session, "event_data": None})
    suffix = '", ' + json.dumps(history or []) + ", null, {}, [], null], " + rest[1:]
    return b'{"data": ["', suffix.encode()


def pieces(total: int, prefix: bytes, suffix: bytes) -> Iterator[bytes]:
    """``prefix``, then "a" filler, then ``suffix``: ``total`` bytes in chunks of at most CHUNK."""
    filler = b"a" * CHUNK
    left = max(0, total - len(prefix) - len(suffix))
    if prefix:
        yield prefix
    while left > 0:
        yield filler[: min(CHUNK, left)]
        left -= CHUNK
    if suffix:
        yield suffix


def post_streamed(
    base: str,
    path: str,
    total: int,
    prefix: bytes = b"",
    suffix: bytes = b"",
    headers: dict[str, str] | None = None,
    timeout: float = 30.0,
) -> Streamed:
    """POST ``prefix``, filler and ``suffix`` (``total`` bytes in all) as a chunked body, without Content-Length;
    stops sending as soon as the server replies or stops reading for ``timeout`` seconds."""
    url = urlsplit(base)
    host, port = url.hostname or "127.0.0.1", url.port or 80
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}:{port}", "Transfer-Encoding: chunked"]
    lines += [f"{k}: {v}" for k, v in {"Content-Type": "application/json", **(headers or {})}.items()]
    sent = 0
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        # poll, not select: late in a long run the socket's descriptor can be past select's limit of 1024
        replied = select.poll()
        replied.register(sock, select.POLLIN)
        try:
            for piece in pieces(total, prefix, suffix):
                if replied.poll(0):
                    break  # the server has answered: an attacker's client would stop here too
                sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
                sent += len(piece)
            else:
                sock.sendall(b"0\r\n\r\n")
        except (TimeoutError, BrokenPipeError, ConnectionResetError):
            pass
        return Streamed(*status_and_reply(sock, timeout), sent=sent)


def status_and_reply(sock: socket.socket, timeout: float) -> tuple[int | None, bytes]:
    """(status, the reply's head and body) read from ``sock``; status None when nothing came."""
    reply = b""
    sock.settimeout(timeout)
    try:
        while not complete(reply):
            data = sock.recv(65536)
            if not data:
                break
            reply += data
    except (TimeoutError, ConnectionResetError):
        pass
    status = int(reply.split(b" ", 2)[1]) if reply.startswith(b"HTTP/") else None
    return status, reply


def complete(reply: bytes) -> bool:
    """True when ``reply`` holds a whole head and as much body as its Content-Length says."""
    head, found, body = reply.partition(b"\r\n\r\n")
    if not found:
        return False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    return True


def post_regardless(url: str, total: int, headers: dict[str, str], prefix: bytes = b"") -> Streamed:
    """POST ``prefix`` and zero bytes, ``total`` in all, and go on sending whatever the server answers, until it
    drops the connection (an attacker who does not read the reply): what was sent tells whether the server read
    it all."""
    sent = 0

    def body() -> Iterator[bytes]:
        nonlocal sent
        yield prefix
        chunk = b"\0" * (1024 * 1024)
        while sent < total:
            sent += len(chunk)
            yield chunk

    try:
        r = httpx.post(url, content=body(), headers=headers, timeout=60)
        return Streamed(r.status_code, r.content, sent)
    except (httpx.WriteError, httpx.RemoteProtocolError, httpx.ReadError):
        return Streamed(None, b"", sent)  # dropped after refusing: the client saw no reply


def upload_regardless(base: str, total: int, headers: dict[str, str]) -> Streamed:
    """:func:`post_regardless` of a ``total``-byte PNG to the page's upload endpoint."""
    form = b'--x\r\nContent-Disposition: form-data; name="files"; filename="big.png"\r\n\r\n\x89PNG\r\n\x1a\n'
    headers = {**headers, "Content-Type": "multipart/form-data; boundary=x"}
    return post_regardless(f"{base}/gradio_api/upload", total, headers, form)
