"""A local OpenAI-compatible chat server for tests: real HTTP and SSE, scripted replies and faults."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler

from tests.support.http_stub import StubServer


@dataclass
class Fault:
    """One scripted misbehaviour for the next request: an HTTP status, a delay, a stream cut mid-answer, or a raw
    HTTP 200 ``body`` of ``content_type`` instead of the API's answer (a proxy's HTML error page, broken JSON)."""

    status: int | None = None
    sleep: float = 0.0
    break_after: int | None = None
    body: bytes | None = None
    content_type: str = "text/html; charset=utf-8"


def default_reply(body: dict) -> str:
    """Echo the last user message's question line so tests can see what reached the model."""
    last = body["messages"][-1]["content"]
    return f"模型回答：{last.splitlines()[-1][:200]}"


class LocalLLMServer:
    """ThreadingHTTPServer on 127.0.0.1:<free port> speaking /v1/chat/completions (JSON and SSE)."""

    def __init__(self):
        self.requests: list[dict] = []
        self.faults: deque[Fault] = deque()
        self.reply: Callable[[dict], str] = default_reply
        self.chunk_delay = 0.0
        self.piece_size = 4  # characters per streamed content delta
        # Reasoning streamed as ``reasoning_content`` deltas before the content (DeepSeek-R1, vLLM), or None.
        self.reasoning: Callable[[dict], str] | None = None
        self.in_flight = 0  # chat requests being answered now, and the most ever at once
        self.max_in_flight = 0
        self._count_lock = threading.Lock()
        self._stub = StubServer(self._handler(), quiet=True)

    @property
    def url(self) -> str:
        """Base URL to put in llm.base_url."""
        return f"{self._stub.base}/v1"

    def start(self) -> LocalLLMServer:
        """Start serving in a background thread."""
        self._stub.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._stub.stop()

    def fail(self, *faults: Fault) -> None:
        """Queue faults for the next requests, in order."""
        self.faults.extend(faults)

    def _handler(server_self):
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output quiet
                pass

            def _json(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self._leave()
                self.wfile.write(data)

            def _leave(self) -> None:
                """No longer in flight: called before the last bytes go out, since a client that has read them may
                send its next request before this thread gets further (the bound it keeps would look broken)."""
                if getattr(self, "_counted", False):
                    self._counted = False
                    with server_self._count_lock:
                        server_self.in_flight -= 1

            def _raw(self, data: bytes, content_type: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._json(200, {"object": "list", "data": [{"id": "local-test", "object": "model"}]})

            def do_POST(self):
                with server_self._count_lock:
                    server_self.in_flight += 1
                    server_self.max_in_flight = max(server_self.max_in_flight, server_self.in_flight)
                self._counted = True
                try:
                    self._post()
                finally:
                    self._leave()

            def _post(self):
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.endswith("/chat/completions"):
                    return self._json(404, {"error": {"message": "not found"}})
                server_self.requests.append({"body": body, "headers": {k.lower(): v for k, v in self.headers.items()}})
                fault = server_self.faults.popleft() if server_self.faults else Fault()
                if fault.sleep:
                    time.sleep(fault.sleep)
                if fault.body is not None:
                    return self._raw(fault.body, fault.content_type)
                if fault.status:
                    return self._json(
                        fault.status, {"error": {"message": f"scripted {fault.status}", "type": "server_error"}}
                    )
                text = server_self.reply(body)
                if not body.get("stream"):
                    return self._json(
                        200,
                        {
                            "id": "chatcmpl-test",
                            "object": "chat.completion",
                            "created": int(time.time()),
                            "model": body.get("model"),
                            "choices": [
                                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                            ],
                            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                        },
                    )
                self._stream(body, text, fault)

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            def _stream(self, body: dict, text: str, fault: Fault) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                size = server_self.piece_size
                thinking = server_self.reasoning(body) if server_self.reasoning else ""
                deltas = [{"reasoning_content": thinking[i : i + size]} for i in range(0, len(thinking), size)]
                deltas += [{"content": text[i : i + size]} for i in range(0, len(text), size)] or [{"content": ""}]
                for n, delta in enumerate(deltas):
                    if fault.break_after is not None and n >= fault.break_after:
                        # Drop the connection mid-body: the client sees an incomplete chunked read.
                        self.wfile.flush()
                        self.connection.shutdown(socket.SHUT_RDWR)
                        self.close_connection = True
                        return
                    event = {
                        "id": "chatcmpl-test",
                        "object": "chat.completion.chunk",
                        "created": 0,
                        "model": body.get("model"),
                        "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
                    }
                    self._chunk(f"data: {json.dumps(event, ensure_ascii=False)}\n\n".encode())
                    if server_self.chunk_delay:
                        time.sleep(server_self.chunk_delay)
                self._leave()
                self._chunk(b"data: [DONE]\n\n")
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        return Handler
