"""Gradio events over plain HTTP, as a fresh browser tab or a script would send them (tests and benchmarks)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx


def queue_call(base: str, fn_index: int, inputs: int, headers: dict | None = None) -> str:
    """One event through the queue (``/gradio_api/queue/join``, no cookie unless ``headers``): the raw SSE text."""
    session = uuid.uuid4().hex
    with httpx.Client(base_url=base, timeout=60, headers=headers or {}) as http:
        joined = http.post(
            "/gradio_api/queue/join",
            json={"data": [None] * inputs, "fn_index": fn_index, "session_hash": session, "event_data": None},
        )
        if joined.status_code != 200:
            return joined.text
        out = []
        with http.stream("GET", "/gradio_api/queue/data", params={"session_hash": session}) as stream:
            for line in stream.iter_lines():
                out.append(line)
                if "process_completed" in line or "close_stream" in line:
                    break
        return "\n".join(out)


def api_call(base: str, api_name: str, *data: Any, headers: dict | None = None) -> Any:
    """One call of a named endpoint (``/gradio_api/call/<name>``): its output data."""
    with httpx.Client(base_url=base, timeout=60, headers=headers or {}) as http:
        event = http.post(f"/gradio_api/call/{api_name}", json={"data": list(data)}).json()["event_id"]
        text = http.get(f"/gradio_api/call/{api_name}/{event}").text
    return json.loads([line[len("data: ") :] for line in text.splitlines() if line.startswith("data: ")][-1])
