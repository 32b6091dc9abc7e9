"""The hand-off through the served app over real HTTP: an API client asks for a person, an agent logs in at /agent,
claims (a second agent is told it is taken), replies; the client fetches the reply from /v1/handoff/messages, its
messages go to the agent while the bot stays quiet, and after the resolve the bot answers again. Guessed ids read
nothing; the console refuses anyone who is not an agent (or an admin). The widget's endpoint, and the CLI's list."""

from __future__ import annotations

import json
import threading

import httpx
import pytest

from bot.config.settings import AgentAccount
from bot.config.variants import replace, update
from bot.handoff.passwords import hash_password
from bot.texts import HANDOFF_WAIT, STAFF_RESOLVED
from tests.support.cli import run
from tests.support.knowledge import with_cutoffs
from tests.support.serving import TOKEN, client, kbbot

pytestmark = pytest.mark.e2e

AGENTS = {"alice": "alice-password-1", "bob": "bob-password-22"}
WIDGET_TOKEN = "widget-token-for-tests"
ALLOWED = "http://127.0.0.1:8081"


@pytest.fixture(scope="module")
def hashes() -> dict[str, str]:
    return {name: hash_password(password) for name, password in AGENTS.items()}


@pytest.fixture
def desk_settings(settings, hashes, monkeypatch):
    monkeypatch.setenv(settings.widget.token_env, WIDGET_TOKEN)
    settings = update(
        settings,
        {
            "handoff.agents": [AgentAccount(name=n, password_hash=h) for n, h in hashes.items()],
            "widget.enabled": True,
            "widget.allowed_origins": [ALLOWED],
        },
    )
    return with_cutoffs(settings, "sparse", 0.5)


def agent(base: str, name: str) -> httpx.Client:
    """An HTTP client logged in at /agent/login as ``name``."""
    http = httpx.Client(base_url=base, timeout=30)
    r = http.post("/agent/login", data={"username": name, "password": AGENTS[name]})
    assert r.status_code == 303 and "kbbot_agent" in r.cookies, r.text
    return http


def ask(v1: str, question: str, conversation: str | None = None, history=()):
    extra = {"kbbot": {"conversation": conversation}} if conversation else {}
    return client(v1).chat.completions.create(
        model="kbbot", messages=[*history, {"role": "user", "content": question}], extra_body=extra
    )


def messages(base: str, conversation: str, after: int = 0) -> httpx.Response:
    return httpx.post(
        f"{base}/v1/handoff/messages",
        json={"conversation": conversation, "after": after},
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=30,
    )


def test_the_whole_path_over_the_api_and_the_console(desk_settings, serve_api, tmp_path):
    v1 = serve_api(desk_settings)
    base = v1.removesuffix("/v1")
    asked = ask(v1, "转人工")
    handoff = kbbot(asked)["handoff"]
    assert asked.choices[0].message.content == HANDOFF_WAIT and kbbot(asked)["decision"] == "handoff"
    assert handoff["status"] == "open" and isinstance(handoff["id"], int) and len(handoff["conversation"]) >= 32
    secret, ticket = handoff["conversation"], handoff["id"]

    alice, bob = agent(base, "alice"), agent(base, "bob")
    listed = alice.get("/agent/api/tickets").json()
    assert listed["agent"] == "alice" and [t["id"] for t in listed["tickets"]] == [ticket]
    assert listed["tickets"][0]["transcript"][-1] == {"said": "visitor", "text": "转人工"}
    assert listed["tickets"][0]["waited"] >= 0
    assert alice.post(f"/agent/api/tickets/{ticket}/claim", json={}).json()["won"] is True
    taken = bob.post(f"/agent/api/tickets/{ticket}/claim", json={})
    assert taken.status_code == 409 and "alice" in taken.json()["error"]
    assert bob.post(f"/agent/api/tickets/{ticket}/reply", json={"text": "我来"}).status_code == 409
    sent = alice.post(f"/agent/api/tickets/{ticket}/reply", json={"text": "<b>您好</b>，我是 alice"})
    assert sent.status_code == 200 and sent.json()["role"] == "agent"

    news = messages(base, secret).json()
    assert news["status"] == "claimed" and [m["role"] for m in news["messages"]] == ["notice", "agent"]
    assert news["messages"][1] == {**news["messages"][1], "author": "alice", "text": "<b>您好</b>，我是 alice"}
    # while alice holds the conversation, the client's message reaches her and the bot says nothing
    quiet = ask(v1, "我的订单号是 A123", secret)
    assert quiet.choices[0].message.content == "" and kbbot(quiet)["handoff"]["status"] == "claimed"
    detail = alice.get(f"/agent/api/tickets/{ticket}").json()
    assert [m["text"] for m in detail["messages"] if m["role"] == "visitor"] == ["我的订单号是 A123"]

    resolved = alice.post(f"/agent/api/tickets/{ticket}/resolve", json={})
    assert resolved.status_code == 200 and resolved.json()["status"] == "resolved"
    last = messages(base, secret, news["messages"][-1]["id"]).json()
    assert last["status"] == "resolved" and last["messages"][-1]["text"] == STAFF_RESOLVED
    back = ask(v1, "怎么添加知识？", secret)
    assert kbbot(back)["decision"] == "answer" and "knowledge 文件夹" in back.choices[0].message.content

    # the CLI lists the ticket; log stats counts it
    config = tmp_path / "served.yaml"
    config.write_text(json.dumps(desk_settings.model_dump(mode="json")), encoding="utf-8")
    listing = run(config, "handoff", "list", "--json")
    assert listing.returncode == 0, listing.stderr
    [row] = json.loads(listing.stdout)
    assert (row["id"], row["status"], row["reason"], row["agent"]) == (ticket, "resolved", "asked", "alice")
    stats = run(config, "log", "stats", "--json")
    assert stats.returncode == 0, stats.stderr
    tiles = json.loads(stats.stdout)
    assert tiles["handoff_tickets"]["rows"][0][2] == 1 and tiles["handoff_per_day"]["rows"][0][1:3] == [1, 1]
    assert tiles["handoff_rate"]["total"][2] >= 1  # conversations handed off, the outcome (its own definition)
    assert tiles["handoff_first_reply"]["rows"][0][1] == 1


def test_guessed_conversations_read_nothing_and_the_console_refuses_strangers(desk_settings, serve_api):
    v1 = serve_api(desk_settings)
    base = v1.removesuffix("/v1")
    ticket = kbbot(ask(v1, "转人工"))["handoff"]["id"]
    missing = messages(base, "guessed-conversation-0123456789")
    assert missing.status_code == 404 and "No hand-off" in missing.json()["error"]["message"]
    assert messages(base, "x").status_code == 400
    assert httpx.post(f"{base}/v1/handoff/messages", json={"conversation": "a" * 20}).status_code == 401
    stranger = httpx.Client(base_url=base, timeout=30)
    assert stranger.get("/agent/api/tickets").status_code == 401
    assert stranger.post(f"/agent/api/tickets/{ticket}/claim", json={}).status_code == 401
    assert stranger.post(f"/agent/api/tickets/{ticket}/reply", json={"text": "hi"}).status_code == 401
    assert stranger.get("/agent").status_code == 303  # to the login form
    forged = httpx.Client(base_url=base, timeout=30, cookies={"kbbot_agent": "9999999999.abcd.YWxpY2U.0000"})
    assert forged.get("/agent/api/tickets").status_code == 401
    wrong = stranger.post("/agent/login", data={"username": "alice", "password": "not-it"})
    assert wrong.status_code == 401
    alice = agent(base, "alice")
    assert alice.post(f"/agent/api/tickets/{ticket}/claim", content=b"{}").status_code == 415  # no JSON type
    assert alice.get("/agent/api/tickets/999").status_code == 404
    alice.get("/agent/logout")
    assert alice.get("/agent/api/tickets").status_code == 401


def test_the_widget_fetches_a_persons_reply_for_its_own_session_only(desk_settings, serve_api):
    base = serve_api(desk_settings).removesuffix("/v1")
    session = "w" * 24
    body = {"message": "转人工", "history": [], "session": session, "token": WIDGET_TOKEN}
    reply = httpx.post(f"{base}/widget/chat", json=body, headers={"Origin": ALLOWED}, timeout=60).json()
    assert reply["decision"] == "handoff" and reply["handoff"]["status"] == "open"
    alice = agent(base, "alice")
    alice.post(f"/agent/api/tickets/{reply['handoff']['id']}/claim", json={})
    alice.post(f"/agent/api/tickets/{reply['handoff']['id']}/reply", json={"text": "您好"})

    def fetch(s: str, origin: str = ALLOWED, token: str = WIDGET_TOKEN) -> httpx.Response:
        payload = {"session": s, "token": token, "after": 0}
        return httpx.post(f"{base}/widget/messages", json=payload, headers={"Origin": origin}, timeout=30)

    mine = fetch(session).json()
    assert mine["status"] == "claimed" and mine["messages"][-1]["text"] == "您好"
    assert fetch("x" * 24).json() == {"status": None, "ticket": None, "messages": []}
    assert fetch(session, origin="http://evil.example").status_code == 403
    assert fetch(session, token="wrong").status_code == 401


def test_an_admin_is_an_agent_too(settings, serve_api, monkeypatch):
    monkeypatch.setenv(settings.ui.admin.username_env, "boss")
    monkeypatch.setenv(settings.ui.admin.password_env, "boss-password-1")
    v1 = serve_api(replace(with_cutoffs(settings, "sparse", 0.5), "handoff.agents", []))
    base = v1.removesuffix("/v1")
    asked = ask(v1, "转人工")
    assert asked.choices[0].message.content == HANDOFF_WAIT  # an admin can answer: a person replies here
    http = httpx.Client(base_url=base, timeout=30)
    assert http.post("/agent/login", data={"username": "boss", "password": "boss-password-1"}).status_code == 303
    assert http.get("/agent/api/tickets").json()["agent"] == "boss"


def test_closing_the_server_stops_its_staff_notices_worker(desk_settings):
    from tests.support.serving import serve_in_process

    def workers() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "handoff-outbox" and t.is_alive()]

    before = set(workers())
    server, _ = serve_in_process(desk_settings)
    started = [t for t in workers() if t not in before]
    assert server.desk is not None and len(started) == 1
    server.close()
    assert not started[0].is_alive()  # no round runs on after the app (and its database) is gone
