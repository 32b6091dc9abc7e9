"""Rules and per-channel variants through the served app: the API's ``kbbot`` shows strategy rule and the rule,
a regex that backtracks forever costs a request nothing, the log records the turn as a rule, and WeCom's passive
reply and Feishu's message are the entry's variants for them where the API gets its API one."""

from __future__ import annotations

import pytest

from bot.conversations.turn_log import turn_log_from_settings
from tests.support.feishu import FeishuSimulator, text_event
from tests.support.knowledge import TINY, with_cutoffs, write_knowledge
from tests.support.serving import ask, streamed
from tests.support.wecom import WeComSimulator, text_message

pytestmark = pytest.mark.e2e

ON_WECOM = "食堂：东区体育馆旁，11:00-13:00 开饭。"
ON_API = "canteen: east campus, 11:00-13:00"
ON_FEISHU = "食堂（飞书版）：东区体育馆旁"
DOCUMENT = TINY["canteen"]["document"]
CANTEEN = {**TINY["canteen"], "variants": {"wecom": ON_WECOM, "api": ON_API, "feishu": ON_FEISHU}}
RULES = (
    "- regex: '^(a|aa)+$'  # backtracks forever on a run of a before a b\n"
    "  entry: faq:add\n"
    "- contains: [吃饭, 开饭]\n"
    "  entry: faq:canteen\n"
)


@pytest.fixture
def pinned(settings, kb_dir):
    """The settings over the tiny knowledge with a canteen that has variants, and the rules file."""
    write_knowledge(kb_dir, {**TINY, "canteen": CANTEEN})
    (kb_dir / "rules.yaml").write_text(RULES, encoding="utf-8")
    return with_cutoffs(settings, "sparse", 0.5)


def test_the_api_answers_a_rule_with_its_api_variant_and_says_which_rule(pinned, serve_api):
    url = serve_api(pinned)
    completion = ask(url, "今天中午去哪吃饭")
    assert completion.choices[0].message.content == ON_API
    extra = completion.kbbot
    assert extra["strategy"] == "rule" and extra["decision"] == "answer" and not extra["llm_used"]
    assert extra["rule"] == {"kind": "contains", "pattern": "吃饭", "id": "faq:canteen", "line": 3}
    assert [s["id"] for s in extra["sources"]] == ["faq:canteen"] and extra["sources"][0]["searcher"] == "rule"
    chunks, text = streamed(url, "开饭了吗？")
    assert text == ON_API and chunks[-1].kbbot["strategy"] == "rule" and chunks[-1].kbbot["rule"]["line"] == 3
    # the pathological regex runs out of time: the request is answered from the search
    slow = ask(url, "a" * 300 + "b 怎么添加知识？").kbbot
    assert slow["strategy"] != "rule" and slow["rule"] is None and slow["sources"][0]["id"] == "faq:add"
    # a question the search answers gets the API variant too: the reply is the entry's own text
    searched = ask(url, "食堂在哪里？")
    assert searched.kbbot["strategy"] == "direct" and ON_API in searched.choices[0].message.content
    log = turn_log_from_settings(pinned)
    assert log is not None
    rows = {r["question"]: r for r in log.recent(10)}
    assert rows["今天中午去哪吃饭"]["strategy"] == "rule" and rows["今天中午去哪吃饭"]["source"] == "api"


def test_wecom_gets_its_variant_of_a_rule_answer_and_of_a_searched_one(pinned, wecom_settings, serve_api):
    settings = with_cutoffs(wecom_settings, "sparse", 0.5)
    sim = WeComSimulator(serve_api(settings).removesuffix("/v1") + settings.wecom.path)
    rule = sim.reply(sim.post(text_message("中午吃饭去哪儿", user="lisi", msg_id="1")))
    assert rule["Content"] == ON_WECOM
    searched = sim.reply(sim.post(text_message("食堂在哪里？", user="lisi", msg_id="2")))
    assert ON_WECOM in searched["Content"] and DOCUMENT not in searched["Content"]
    log = turn_log_from_settings(settings)
    assert log is not None
    rows = {r["question"]: r for r in log.recent(10)}
    assert rows["中午吃饭去哪儿"]["strategy"] == "rule" and rows["中午吃饭去哪儿"]["source"] == "wecom"


def test_feishu_sends_its_variant_of_a_rule_answer_through_the_im_api(
    pinned, feishu_settings, serve_api, open_platform
):
    settings = with_cutoffs(feishu_settings, "sparse", 0.5)
    sim = FeishuSimulator(serve_api(settings).removesuffix("/v1") + settings.feishu.path)
    assert sim.post(text_event("开饭了没")).status_code == 200
    (sent,) = open_platform.wait_sent(1)
    assert sent["text"] == ON_FEISHU
