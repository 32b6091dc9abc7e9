"""The same question through the page, the API, the widget and WeCom (its simulator) gets the same decision and the
same entries: the core owns the turn, the front ends only translate (issue 26). Read back from the conversation log,
where every front end records its turns."""

from __future__ import annotations

import httpx
import pytest

from bot.config.variants import replace, update
from bot.conversations.turn_log import turn_log_from_settings
from tests.support.knowledge import FEES, with_thresholds, write_knowledge
from tests.support.serving import call_event, client
from tests.support.wecom import WeComSimulator, text_message

pytestmark = pytest.mark.e2e

WIDGET_TOKEN = "widget-token-for-parity"
QUESTIONS = ["校园网怎么连接？", "学费是多少？", "转人工", "你好", "火星上有几座城市？"]


def test_page_api_widget_and_wecom_decide_alike(wecom_settings, serve_api, monkeypatch, tmp_path):
    settings = wecom_settings
    write_knowledge(tmp_path / "fees", FEES)
    settings = replace(settings, "knowledge.path", str(tmp_path / "fees"))
    settings = with_thresholds(
        settings, "sparse", settings.retrieval.thresholds["sparse"].model_copy(update={"answer": 0.3, "clarify": 0.05})
    )
    monkeypatch.setenv(settings.widget.token_env, WIDGET_TOKEN)
    settings = update(settings, {"widget.enabled": True, "widget.allowed_origins": ["http://127.0.0.1:9"]})
    v1 = serve_api(settings)
    base = v1.removesuffix("/v1")
    wecom = WeComSimulator(base + settings.wecom.path)
    for i, question in enumerate(QUESTIONS):
        event, _ = call_event(base + "/", "chat", [question, [], "follow"])
        assert event == "complete", question
        client(v1).chat.completions.create(model="kbbot", messages=[{"role": "user", "content": question}])
        body = {"message": question, "history": [], "session": f"parity-session-{i}", "token": WIDGET_TOKEN}
        r = httpx.post(f"{base}/widget/chat", json=body, headers={"Origin": "http://127.0.0.1:9"}, timeout=60)
        assert r.status_code == 200, r.text
        # a user of their own per question: WeCom's history is per user, the others send none here
        reply = wecom.post(text_message(question, user=f"parity-{i}", msg_id=str(100 + i)))
        assert wecom.reply(reply)["Content"], question  # the passive reply: the turn is logged by now
    log = turn_log_from_settings(settings)
    assert log is not None
    seen: dict[str, dict[str, tuple]] = {}
    for row in log.recent(100):
        ids = tuple(h.get("id") for h in row["hits"])
        seen.setdefault(row["question"], {})[row["source"] or ""] = (row["strategy"], ids)
    assert set(seen) == set(QUESTIONS)
    decisions = set()
    for question, by_source in seen.items():
        assert set(by_source) == {"web", "api", "widget", "wecom"}, question
        assert len(set(by_source.values())) == 1, (question, by_source)
        decisions.add(next(iter(by_source.values()))[0])
    assert len(decisions) >= 4  # the questions cover answer, clarify, hand-off, chit-chat and the fallback
