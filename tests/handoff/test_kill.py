"""kill -9 of the app with open tickets: ``python -m bot serve`` in a child process takes hand-offs, an agent's claim
and replies and the visitors' messages over HTTP, is killed with SIGKILL, and served again from the same state:
every ticket, every message and every staff notice not yet sent is still there, and the notices go out after the
restart (the webhook was down before the kill)."""

from __future__ import annotations

import signal

import httpx
import pytest

from bot.config.settings import AgentAccount
from bot.config.variants import update
from bot.handoff.passwords import hash_password
from tests.support.knowledge import with_cutoffs
from tests.support.ports import free_port
from tests.support.replicas import Replica, replica_config
from tests.support.serving import TOKEN
from tests.support.webhook import Hook

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

PASSWORD = "alice-password-1"
VISITORS = 5


def chat(base: str, text: str, conversation: str | None = None) -> dict:
    body: dict = {"model": "kbbot", "messages": [{"role": "user", "content": text}]}
    if conversation:
        body["kbbot"] = {"conversation": conversation}
    r = httpx.post(f"{base}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
    r.raise_for_status()
    return r.json()


def test_kill_9_with_open_tickets_loses_no_ticket_message_or_notice(settings, tmp_path):
    down = f"http://127.0.0.1:{free_port()}/hook"  # nothing listens: every notice waits in the outbox
    settings = update(
        with_cutoffs(settings, "sparse", 0.5),
        {
            "handoff.agents": [AgentAccount(name="alice", password_hash=hash_password(PASSWORD))],
            "handoff.webhook.url": down,
            "handoff.webhook.retries": 0,
            "handoff.notify.poll_seconds": 0.5,
            "handoff.notify.retry_seconds": 0.5,
            "handoff.notify.max_retry_seconds": 1,
            # a notice the kill caught mid-send is sent again once its lease runs out
            "handoff.notify.lease_seconds": 5,
        },
    )
    config = replica_config(settings, tmp_path, "app")
    env = {settings.api.token_env: TOKEN}
    app = Replica("app", config, env).wait_ready(TOKEN)
    try:
        handoffs = [chat(app.url, "转人工")["kbbot"]["handoff"] for _ in range(VISITORS)]
        agent = httpx.Client(base_url=app.url, timeout=30)
        assert agent.post("/agent/login", data={"username": "alice", "password": PASSWORD}).status_code == 303
        first = handoffs[0]
        agent.post(f"/agent/api/tickets/{first['id']}/claim", json={})
        agent.post(f"/agent/api/tickets/{first['id']}/reply", json={"text": "您好"})
        chat(app.url, "我的问题是宿舍断网", first["conversation"])
        before = agent.get(f"/agent/api/tickets/{first['id']}").json()
        app.process.send_signal(signal.SIGKILL)
        app.process.wait(timeout=30)
    finally:
        app.stop()

    hook = Hook()
    try:
        config.write_text(config.read_text(encoding="utf-8").replace(down, hook.url), encoding="utf-8")
        again = Replica("again", config, env).wait_ready(TOKEN)
        try:
            agent = httpx.Client(base_url=again.url, timeout=30)
            assert agent.post("/agent/login", data={"username": "alice", "password": PASSWORD}).status_code == 303
            waiting = agent.get("/agent/api/tickets?status=open").json()["tickets"]
            assert sorted(t["id"] for t in waiting) == sorted(h["id"] for h in handoffs[1:])
            after = agent.get(f"/agent/api/tickets/{first['id']}").json()
            assert after["status"] == "claimed" and after["agent"] == "alice"
            assert [(m["role"], m["text"]) for m in after["messages"]] == [
                (m["role"], m["text"]) for m in before["messages"]
            ]
            assert ("visitor", "我的问题是宿舍断网") in [(m["role"], m["text"]) for m in after["messages"]]
            import time

            deadline = time.monotonic() + 60
            while len(hook.received) < VISITORS and time.monotonic() < deadline:
                time.sleep(0.2)
            assert sorted(body["ticket"] for body, _ in hook.received) == sorted(h["id"] for h in handoffs)
        finally:
            again.stop()
    finally:
        hook.close()
