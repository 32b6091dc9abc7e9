"""The hand-off in Feishu, against the simulator and the stand-in open platform: a member asks for a person, an agent
claims and replies and the chat receives it (marked as a person's); the member's messages go to the agent while the bot
stays silent; after the resolve the bot answers again."""

from __future__ import annotations

import time

import httpx
import pytest

from bot.config.settings import AgentAccount
from bot.config.variants import update
from bot.handoff.passwords import hash_password
from bot.texts import HANDOFF_WAIT, STAFF_JOINED, STAFF_RESOLVED
from tests.support.feishu import P2P_CHAT, FeishuSimulator, text_event
from tests.support.knowledge import with_cutoffs

pytestmark = pytest.mark.e2e

PASSWORD = "alice-password-1"


def test_the_whole_path_in_feishu(feishu_settings, serve_api, open_platform):
    settings = update(
        with_cutoffs(feishu_settings, "sparse", 0.5),
        {
            "handoff.agents": [AgentAccount(name="alice", password_hash=hash_password(PASSWORD))],
            "handoff.notify.poll_seconds": 0.2,
        },
    )
    base = serve_api(settings).removesuffix("/v1")
    sim = FeishuSimulator(base + settings.feishu.path)
    assert sim.post(text_event("转人工", event_id="e1")).status_code == 200
    [asked] = open_platform.wait_sent(1)
    assert asked["receive_id"] == P2P_CHAT and asked["text"] == HANDOFF_WAIT

    http = httpx.Client(base_url=base, timeout=30)
    assert http.post("/agent/login", data={"username": "alice", "password": PASSWORD}).status_code == 303
    [ticket] = http.get("/agent/api/tickets").json()["tickets"]
    assert ticket["channel"] == "feishu" and P2P_CHAT not in str(ticket)  # the chat id stays out of the console
    http.post(f"/agent/api/tickets/{ticket['id']}/claim", json={})
    http.post(f"/agent/api/tickets/{ticket['id']}/reply", json={"text": "<b>您好</b>，我是人工客服"})
    pushed = [m["text"] for m in open_platform.wait_sent(3)[1:]]
    assert pushed == [STAFF_JOINED.format(name="alice"), "👤 alice（人工客服 / staff）：<b>您好</b>，我是人工客服"]
    assert all(m["receive_id"] == P2P_CHAT for m in open_platform.sent)

    assert sim.post(text_event("我的学号是 20231234", event_id="e2")).status_code == 200
    time.sleep(1.0)  # the bot stays silent; alice reads it
    assert len(open_platform.sent) == 3
    detail = http.get(f"/agent/api/tickets/{ticket['id']}").json()
    assert [m["text"] for m in detail["messages"] if m["role"] == "visitor"] == ["我的学号是 20231234"]

    http.post(f"/agent/api/tickets/{ticket['id']}/resolve", json={})
    assert open_platform.wait_sent(4)[3]["text"] == STAFF_RESOLVED
    sim.post(text_event("怎么添加知识？", event_id="e3"))
    assert "knowledge 文件夹" in open_platform.wait_sent(5)[4]["text"]
