"""Talking to a served app as its clients do: the OpenAI client on /v1, Gradio events over plain HTTP, the admin
login. The fixtures that start the app are in tests/conftest.py (serve_api, serve_app, served, app_client)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import httpx
import openai

import app
from bot.chat.bot import Bot
from bot.factory import build_knowledge_base
from bot.knowledge_base import KnowledgeBase
from bot.server import Server
from bot.ui.admin import COOKIE
from tests.support.ports import free_port

TOKEN = "kbbot-test-token-0123456789abcdef"  # the API token the served apps are given
ADMIN_LOGIN = ("boss", "s3cret-pass")  # the admin of the `served` app
LAUNCH_TRIES = 3  # launches of one app before a test gives up
LOOPBACK = {"server_name": "127.0.0.1", "prevent_thread_lock": True, "quiet": True}  # how test apps are launched
ADMIN_COOKIE: dict[str, str] = {}  # the Cookie header of an admin session of the app `serve_app` started last


def client(base_url: str, token: str = TOKEN) -> openai.OpenAI:
    """The openai client pointed at the app, without retries (a 429 or 5xx must surface at once)."""
    return openai.OpenAI(base_url=base_url, api_key=token, max_retries=0, timeout=60)


def ask(base_url: str, question: str, model: str = "kbbot", **kwargs):
    """One non-streamed completion."""
    return client(base_url).chat.completions.create(
        model=model, messages=[{"role": "user", "content": question}], **kwargs
    )


def streamed(base_url: str, question: str, model: str = "kbbot", messages=None):
    """(chunks, joined content) of one streamed completion."""
    chunks = list(
        client(base_url).chat.completions.create(
            model=model, messages=messages or [{"role": "user", "content": question}], stream=True
        )
    )
    return chunks, "".join(c.choices[0].delta.content or "" for c in chunks)


def kbbot(reply: Any) -> dict[str, Any]:
    """The ``kbbot`` extension field of a completion, chunk or model (an extra field the openai types do not declare)."""
    extra = reply.model_extra
    assert extra is not None and "kbbot" in extra, f"no kbbot field in {reply!r}"
    return extra["kbbot"]


def error_body(error: openai.APIError) -> dict[str, Any]:
    """The JSON error object of an API error (``body`` is typed ``object`` by the openai client)."""
    assert isinstance(error.body, dict), f"no JSON error body: {error.body!r}"
    return error.body


def call_event(url: str, api_name: str, data: list, cookies: dict | None = None) -> tuple[str, Any]:
    """POST /gradio_api/call/<api_name>, then read its event stream: (last event name, its JSON data)."""
    with httpx.Client(base_url=url, cookies=cookies, timeout=60) as http:
        r = http.post(f"gradio_api/call/{api_name}", json={"data": data})
        r.raise_for_status()
        event, payload = "", None
        with http.stream("GET", f"gradio_api/call/{api_name}/{r.json()['event_id']}") as stream:
            for line in stream.iter_lines():
                if line.startswith("event:"):
                    event = line.split(":", 1)[1].strip()
                elif line.startswith("data:"):
                    payload = json.loads(line.split(":", 1)[1]) if line.split(":", 1)[1].strip() else None
                    if event in ("complete", "error"):
                        return event, payload
    return event, payload


def admin_call(base: str, api_name: str, *data):
    """One call of a Gradio endpoint over plain HTTP (``/gradio_api/call/<name>``), as a fresh client would: its data."""
    with httpx.Client(base_url=base, timeout=60, headers=ADMIN_COOKIE) as http:
        event = http.post(f"/gradio_api/call/{api_name}", json={"data": list(data)}).json()["event_id"]
        text = http.get(f"/gradio_api/call/{api_name}/{event}").text
    events = [line[len("data: ") :] for line in text.splitlines() if line.startswith("data: ")]
    return json.loads(events[-1])


def login(url: str) -> dict:
    """The admin cookie from POST /admin/login."""
    r = httpx.post(f"{url}admin/login", data={"username": ADMIN_LOGIN[0], "password": ADMIN_LOGIN[1]})
    assert r.status_code == 303 and COOKIE in r.cookies
    return {COOKIE: r.cookies[COOKIE]}


def serve_in_process(settings: Any, bot: Bot | KnowledgeBase | None = None, **launch: Any) -> tuple[Server, str]:
    """``app.build_server`` + ``app.serve`` on a free loopback port, not blocking: (server, base URL without "/");
    ``server.close()`` stops it and its background workers.

    ``bot``: the default knowledge base (or its Bot), when the test built it (else the server builds it)."""
    kb = build_knowledge_base(settings, bot) if isinstance(bot, Bot) else bot
    server = app.build_server(settings, kb)
    port = on_a_free_port(lambda port: app.serve(server, server_port=port, **LOOPBACK, **launch), server.page.close)
    return server, f"http://127.0.0.1:{port}"


def launched(demo: Any) -> str:
    """``demo.launch`` on a free loopback port, not blocking: its base URL without "/"."""
    port = on_a_free_port(lambda port: demo.launch(server_port=port, **LOOPBACK), demo.close)
    return f"http://127.0.0.1:{port}"


def on_a_free_port(launch: Callable[[int], object], close: Callable[[], object]) -> int:
    """The port ``launch(port)`` served on: a free loopback port, another one after a failed launch (``close``
    stops what it started), at most ``LAUNCH_TRIES`` launches."""
    # Gradio's launch fails when the port is taken between free_port() and its bind (another test worker), or when
    # its own check of the first page (HEAD /, 3 s timeout; 0.09 s when idle) times out on a loaded machine.
    for attempt in range(LAUNCH_TRIES):
        port = free_port()
        try:
            launch(port)
        except Exception as error:
            close()
            if attempt == LAUNCH_TRIES - 1:
                raise
            print(f"launch on port {port} failed ({error!r}); trying another port", file=sys.stderr)
            continue
        return port
    raise AssertionError("unreachable")


def serve_asked(settings: Any, origin: str, asked: str, times: int = 3, **ui: Any) -> tuple[Server, str]:
    """Serve ``settings`` with the widget on for ``origin`` and "was this solved?" after every answer, after
    ``times`` page visitors asked ``asked`` (the welcome card reads the log as the app starts); (server, base URL).
    ``ui``: more ``ui`` settings (``pinned``, ``examples``...)."""
    from bot.config.variants import update
    from tests.support.knowledge import with_cutoffs

    changes = {"widget.enabled": True, "widget.allowed_origins": [origin], "feedback.ask_solved": "every"}
    settings = with_cutoffs(update(settings, changes | {f"ui.{k}": v for k, v in ui.items()}), "sparse", 0.5)
    kb = build_knowledge_base(settings)
    for n in range(times):
        kb.ask(asked, session=f"asked-before-{n}", source="web")
    return serve_in_process(settings, kb)
