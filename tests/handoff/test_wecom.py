"""The hand-off in WeCom, against the simulator and the stand-in send API: a user asks for a person, listed staff get
an app message, an agent claims and replies and the user receives it (marked as a person's); the user's messages go
to the agent while the bot stays silent; after the resolve the bot answers again. A send API outage delays the
notices and loses none."""

from __future__ import annotations

import time

import httpx
import pytest

from bot.config.settings import AgentAccount
from bot.config.variants import update
from bot.handoff.passwords import hash_password
from bot.texts import HANDOFF_WAIT, STAFF_JOINED, STAFF_RESOLVED
from tests.support.knowledge import with_cutoffs
from tests.support.wecom import WeComSimulator, text_message

pytestmark = pytest.mark.e2e

PASSWORD = "alice-password-1"


def wait_for(condition, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError("timed out")


def test_the_whole_path_in_wecom_and_an_outage_loses_nothing(wecom_settings, serve_api, qyapi):
    settings = update(
        with_cutoffs(wecom_settings, "sparse", 0.5),
        {
            "handoff.agents": [AgentAccount(name="alice", password_hash=hash_password(PASSWORD))],
            "handoff.notify.wecom_users": ["desk-lead", "desk-2"],
            "handoff.notify.poll_seconds": 0.2,
            "handoff.notify.retry_seconds": 0.5,
            "wecom.send_attempts": 1,
        },
    )
    base = serve_api(settings).removesuffix("/v1")
    sim = WeComSimulator(base + settings.wecom.path)
    qyapi.down = True  # WeCom's send API is out when the request comes in
    asked = sim.reply(sim.post(text_message("转人工", user="lisi", msg_id="1")))
    assert asked["Content"] == HANDOFF_WAIT
    time.sleep(1.5)  # a few rounds of the outbox fail
    assert qyapi.sent == []
    qyapi.down = False
    [notice] = qyapi.wait_sent(1)
    assert notice["touser"] == "desk-lead|desk-2" and "转人工" in notice["text"]["content"]

    http = httpx.Client(base_url=base, timeout=30)
    assert http.post("/agent/login", data={"username": "alice", "password": PASSWORD}).status_code == 303
    [ticket] = http.get("/agent/api/tickets").json()["tickets"]
    assert ticket["channel"] == "wecom" and "lisi" not in str(ticket)  # the UserID stays out of the console
    http.post(f"/agent/api/tickets/{ticket['id']}/claim", json={})
    http.post(f"/agent/api/tickets/{ticket['id']}/reply", json={"text": "您好，我是人工客服"})
    sent = qyapi.wait_sent(3)
    to_user = [m["text"]["content"] for m in sent if m["touser"] == "lisi"]
    assert to_user == [STAFF_JOINED.format(name="alice"), "👤 alice（人工客服 / staff）：您好，我是人工客服"]

    held = sim.post(text_message("我的学号是 20231234", user="lisi", msg_id="2"))
    assert held.status_code == 200 and held.content == b""  # the bot stays silent; alice reads it
    detail = http.get(f"/agent/api/tickets/{ticket['id']}").json()
    assert [m["text"] for m in detail["messages"] if m["role"] == "visitor"] == ["我的学号是 20231234"]

    http.post(f"/agent/api/tickets/{ticket['id']}/resolve", json={})
    assert wait_for(lambda: any(m["text"]["content"] == STAFF_RESOLVED for m in qyapi.sent))
    back = sim.reply(sim.post(text_message("怎么添加知识？", user="lisi", msg_id="3")))
    assert "knowledge 文件夹" in back["Content"]
