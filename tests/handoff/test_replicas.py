"""Tickets shared by replicas over a real PostgreSQL server: two apps serving the same database (their own
connections, their own outbox workers) see each other's tickets, claims and replies; one agent's claim wins across
replicas; one notice is sent once, whichever worker takes it. The store's race rules on both backends."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import httpx
import pytest

from bot.config.settings import AgentAccount
from bot.config.variants import update
from bot.factory import build_bot
from bot.handoff.passwords import hash_password
from bot.handoff.store import TicketStore
from bot.handoff.tickets import Line, Reason, Said, Status
from tests.support.knowledge import with_cutoffs
from tests.support.serving import kbbot
from tests.support.webhook import Hook

pytestmark = pytest.mark.e2e

PASSWORDS = {"alice": "alice-password-1", "bob": "bob-password-22"}


def now() -> datetime:
    return datetime.now(UTC)


def test_one_active_ticket_per_conversation_and_one_claim_wins_on_each_backend(open_log):
    first, second = open_log(), open_log()  # two connections to one database, as two replicas have
    stores = [TicketStore(first, now), TicketStore(second, now)]
    opened = []
    start = threading.Barrier(2)

    def open_one(store: TicketStore) -> None:
        start.wait()
        opened.append(store.open("web:abc", "web", None, Reason.ASKED, "转人工", [Line(Said.VISITOR, "转人工")], {}))

    threads = [threading.Thread(target=open_one, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({ticket.id for ticket, _ in opened}) == 1 and sorted(new for _, new in opened) == [False, True]
    ticket = opened[0][0]
    claims = []

    def claim(store: TicketStore, agent: str) -> None:
        start.wait()
        claims.append(store.claim(ticket.id, agent))

    threads = [threading.Thread(target=claim, args=(s, a)) for s, a in zip(stores, ("alice", "bob"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(c.won for c in claims) == [False, True]
    winner = next(c for c in claims if c.won).ticket.agent
    assert stores[1].get(ticket.id).agent == winner and stores[0].get(ticket.id).status is Status.CLAIMED


def test_two_replicas_over_postgresql_share_tickets_claims_and_replies(pg_settings, serve_api, monkeypatch):
    monkeypatch.setenv(pg_settings.ui.admin.session_key_env, "k" * 40)  # one cookie key on both replicas
    hook = Hook()
    try:
        settings = update(
            with_cutoffs(pg_settings, "sparse", 0.5),
            {
                "handoff.agents": [AgentAccount(name=n, password_hash=hash_password(p)) for n, p in PASSWORDS.items()],
                "handoff.webhook.url": hook.url,
                "handoff.notify.poll_seconds": 0.2,
            },
        )
        one = serve_api(settings, bot=build_bot(settings, watch_config=True, keep_last_good=True))
        two = serve_api(settings, bot=build_bot(settings, watch_config=True, keep_last_good=True))
        from tests.support.serving import client

        asked = client(one).chat.completions.create(model="kbbot", messages=[{"role": "user", "content": "转人工"}])
        handoff = kbbot(asked)["handoff"]

        def agent(v1: str, name: str) -> httpx.Client:
            http = httpx.Client(base_url=v1.removesuffix("/v1"), timeout=30)
            assert http.post("/agent/login", data={"username": name, "password": PASSWORDS[name]}).status_code == 303
            return http

        alice_on_two, bob_on_one = agent(two, "alice"), agent(one, "bob")
        assert [t["id"] for t in alice_on_two.get("/agent/api/tickets").json()["tickets"]] == [handoff["id"]]
        assert alice_on_two.post(f"/agent/api/tickets/{handoff['id']}/claim", json={}).json()["won"]
        taken = bob_on_one.post(f"/agent/api/tickets/{handoff['id']}/claim", json={})
        assert taken.status_code == 409 and "alice" in taken.json()["error"]
        claimed = bob_on_one.get("/agent/api/tickets?status=claimed").json()["tickets"]
        assert [(t["id"], t["agent"]) for t in claimed] == [(handoff["id"], "alice")]
        # the visitor writes through replica one; alice reads it on two and answers there
        quiet = client(one).chat.completions.create(
            model="kbbot",
            messages=[{"role": "user", "content": "在吗"}],
            extra_body={"kbbot": {"conversation": handoff["conversation"]}},
        )
        assert quiet.choices[0].message.content == ""
        detail = alice_on_two.get(f"/agent/api/tickets/{handoff['id']}").json()
        assert [m["text"] for m in detail["messages"] if m["role"] == "visitor"] == ["在吗"]
        alice_on_two.post(f"/agent/api/tickets/{handoff['id']}/reply", json={"text": "在的"})
        news = httpx.post(
            one.removesuffix("/v1") + "/v1/handoff/messages",
            json={"conversation": handoff["conversation"]},
            headers={"Authorization": client(one).api_key and f"Bearer {client(one).api_key}"},
            timeout=30,
        ).json()
        assert news["status"] == "claimed" and news["messages"][-1]["text"] == "在的"
        time.sleep(2)  # both replicas' workers have had many rounds: the notice went once
        assert len(hook.received) == 1 and hook.received[0][0]["ticket"] == handoff["id"]
    finally:
        hook.close()
