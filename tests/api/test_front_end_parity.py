"""The same question through the page, the API, the widget, WeCom and Feishu (their simulators) gets the same decision
and the same entries: the core owns the turn, the front ends only translate. Read back from the conversation log,
where every front end records its turns."""

from __future__ import annotations

import httpx
import pytest

from bot.config.variants import update
from bot.conversations.turn_log import turn_log_from_settings
from tests.support.feishu import FeishuSimulator, text_event
from tests.support.knowledge import with_fees
from tests.support.serving import call_event, client
from tests.support.wecom import WeComSimulator, text_message

pytestmark = pytest.mark.e2e

WIDGET_TOKEN = "widget-token-for-parity"
QUESTIONS = ["校园网怎么连接？", "学费是多少？", "转人工", "你好", "火星上有几座城市？"]


def test_page_api_widget_wecom_and_feishu_decide_alike(
    wecom_settings, feishu_settings, open_platform, serve_api, monkeypatch, tmp_path
):
    settings = with_fees(wecom_settings, tmp_path / "fees")
    monkeypatch.setenv(settings.widget.token_env, WIDGET_TOKEN)
    # both channel fixtures are variants of the same settings: the Feishu block joins the WeCom one
    on = {"widget.enabled": True, "widget.allowed_origins": ["http://127.0.0.1:9"], "feishu": feishu_settings.feishu}
    settings = update(settings, on)
    v1 = serve_api(settings)
    base = v1.removesuffix("/v1")
    wecom = WeComSimulator(base + settings.wecom.path)
    feishu = FeishuSimulator(base + settings.feishu.path)
    for i, question in enumerate(QUESTIONS):
        event, _ = call_event(base + "/", "chat", [question, [], "follow"])
        assert event == "complete", question
        client(v1).chat.completions.create(model="kbbot", messages=[{"role": "user", "content": question}])
        body = {"message": question, "history": [], "session": f"parity-session-{i}", "token": WIDGET_TOKEN}
        r = httpx.post(f"{base}/widget/chat", json=body, headers={"Origin": "http://127.0.0.1:9"}, timeout=60)
        assert r.status_code == 200, r.text
        # a user of their own per question: the channels' histories are per user, the others send none here
        reply = wecom.post(text_message(question, user=f"parity-{i}", msg_id=str(100 + i)))
        assert wecom.reply(reply)["Content"], question  # the passive reply: the turn is logged by now
        feishu.post(text_event(question, sender=f"ou_parity{i}"))
        open_platform.wait_sent(i + 1)  # sent after the turn was logged
    log = turn_log_from_settings(settings)
    assert log is not None
    seen: dict[str, dict[str, tuple]] = {}
    for row in log.recent(100):
        ids = tuple(h.get("id") for h in row["hits"])
        seen.setdefault(row["question"], {})[row["source"] or ""] = (row["strategy"], ids)
    assert set(seen) == set(QUESTIONS)
    decisions = set()
    for question, by_source in seen.items():
        assert set(by_source) == {"web", "api", "widget", "wecom", "feishu"}, question
        assert len(set(by_source.values())) == 1, (question, by_source)
        decisions.add(next(iter(by_source.values()))[0])
    assert len(decisions) >= 4  # the questions cover answer, clarify, hand-off, chit-chat and the fallback
