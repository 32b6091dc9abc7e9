"""The rule rung and per-channel variants through a real bot on the tiny knowledge: a rule answers before the
search with strategy rule, a regex that backtracks forever costs the turn nothing, bad rules leave the rest
working, and a reply that is an entry's own text is the channel's variant."""

from __future__ import annotations

import json
import logging

import pytest

from bot.chat.answer import Decision, Strategy
from bot.config.variants import replace
from bot.factory import build_bot, build_knowledge_base
from bot.knowledge.filters import entry_filter
from bot.ui.render import health_html, sources_html
from tests.support.knowledge import TINY, with_cutoffs, write_knowledge

pytestmark = pytest.mark.unit

CATASTROPHIC = "^(a|aa)+$"  # backtracks forever on a run of "a" before a "b" (tests/knowledge/test_rules.py)
ON_WECOM = "食堂：东区体育馆旁（企业微信版）"
DOCUMENT = TINY["canteen"]["document"]
CANTEEN = {**TINY["canteen"], "variants": {"wecom": ON_WECOM, "api": "canteen: east campus"}, "categories": ["生活"]}


@pytest.fixture
def rules_settings(settings, kb_dir):
    write_knowledge(kb_dir, {**TINY, "canteen": CANTEEN})
    return with_cutoffs(settings, "sparse", 0.5)


def write_rules(kb_dir, text: str) -> None:
    (kb_dir / "rules.yaml").write_text(text, encoding="utf-8")


def test_a_rule_answers_before_the_search_with_the_entry_text_and_strategy_rule(rules_settings, kb_dir):
    write_rules(kb_dir, "- contains: 吃饭\n  entry: faq:canteen\n- exact: 检索模式\n  entry: faq:threshold\n")
    bot = build_bot(rules_settings)
    answer = bot.answer("中午去哪吃饭？")
    assert answer.strategy is Strategy.RULE and answer.decision is Decision.ANSWER
    assert answer.text == DOCUMENT and not answer.llm_used
    assert [h.entry.id for h in answer.hits] == ["faq:canteen"] and not answer.candidates  # never searched
    assert answer.rule is not None and (answer.rule.kind, answer.rule.line) == ("contains", 1)
    assert answer.to_dict()["rule"] == {"kind": "contains", "pattern": "吃饭", "id": "faq:canteen", "line": 1}
    # an exact rule wins over what the search would answer ("检索模式" retrieves faq:mode)
    pinned = bot.answer("检索模式！")
    assert pinned.strategy is Strategy.RULE and pinned.hits[0].entry.id == "faq:threshold"
    searched = bot.answer("怎么切换检索模式")
    assert searched.strategy is not Strategy.RULE and searched.hits[0].entry.id == "faq:mode"
    html = sources_html(answer)
    assert "精确匹配规则 / rule" in html and "rules.yaml 第 1 行 / line 1" in html
    assert str(kb_dir) not in html  # the server's folder stays on the server


def test_a_regex_that_backtracks_forever_is_reported_and_the_turn_answers_from_the_search(
    rules_settings, kb_dir, caplog
):
    write_rules(kb_dir, f"- regex: '{CATASTROPHIC}'\n  entry: faq:add\n")
    bot = build_bot(rules_settings)
    with caplog.at_level(logging.WARNING, logger="bot.chat.steps.rule"):
        answer = bot.answer("a" * 200 + "b 食堂在哪里？")
    assert answer.finished and answer.strategy is not Strategy.RULE
    assert answer.hits and answer.hits[0].entry.id == "faq:canteen"
    (record,) = [r for r in caplog.records if "timed out" in r.getMessage()]
    assert CATASTROPHIC in record.getMessage() and f"{kb_dir / 'rules.yaml'}:1" in record.getMessage()


def test_bad_rules_are_logged_with_file_and_line_and_the_knowledge_and_other_rules_serve(
    rules_settings, kb_dir, caplog
):
    write_rules(
        kb_dir,
        "- exact: 旧规则\n  entry: faq:removed\n- regex: '(没闭合'\n  entry: faq:add\n- exact: 食堂\n  entry: faq:canteen\n",
    )
    with caplog.at_level(logging.ERROR, logger="bot.search.loading"):
        bot = build_bot(rules_settings)
    logged = [r.getMessage() for r in caplog.records]
    assert any("rules.yaml:1: the rule answers with entry 'faq:removed'" in m for m in logged)
    assert any("rules.yaml:3: the regex '(没闭合' does not compile" in m for m in logged)
    assert bot.index.error is None and len(bot.index.entries) == len(TINY)
    health = health_html(bot.status())  # the knowledge tab's view, for admins
    assert "Some rules of rules.yaml were left out" in health and "rules.yaml:3: the regex" in health
    assert bot.answer("食堂").strategy is Strategy.RULE
    assert bot.answer("怎么添加知识？").hits[0].entry.id == "faq:add"


def test_an_edited_rules_file_counts_from_the_next_message(rules_settings, kb_dir):
    bot = build_bot(rules_settings)
    assert bot.answer("开饭啦").strategy is not Strategy.RULE
    write_rules(kb_dir, "- exact: 开饭啦\n  entry: faq:canteen\n")
    assert bot.answer("开饭啦").strategy is Strategy.RULE


def test_a_rule_keeps_to_the_category_filter_and_is_off_when_the_ladder_leaves_it_out(rules_settings, kb_dir):
    write_rules(kb_dir, "- exact: 开饭啦\n  entry: faq:canteen\n")
    bot = build_bot(rules_settings)
    assert bot.answer("开饭啦", within=entry_filter(["生活"])).strategy is Strategy.RULE
    assert bot.answer("开饭啦", within=entry_filter(["教务"])).strategy is not Strategy.RULE
    steps = [s for s in rules_settings.ladder.steps if s != "rule"]
    assert build_bot(replace(rules_settings, "ladder.steps", steps)).answer("开饭啦").strategy is not Strategy.RULE


def test_each_channel_gets_its_variant_of_a_rule_answer_and_of_a_retrieval_only_one(rules_settings, kb_dir):
    write_rules(kb_dir, "- exact: 开饭啦\n  entry: faq:canteen\n")
    kb = build_knowledge_base(rules_settings)
    assert kb.ask("开饭啦", source="wecom").text == ON_WECOM
    assert kb.ask("开饭啦", source="api").text == "canteen: east campus"
    assert kb.ask("开饭啦", source="web").text == DOCUMENT  # no web variant: the document
    searched = kb.ask("食堂在哪里？", source="wecom")
    assert searched.strategy is not Strategy.RULE and searched.channel == "wecom"
    assert ON_WECOM in searched.text and DOCUMENT not in searched.text
    assert DOCUMENT in kb.ask("食堂在哪里？", source="widget").text


def test_a_verbatim_reply_is_the_channel_variant_and_the_llm_is_given_the_document(llm_settings, kb_dir, llm_server):
    write_knowledge(kb_dir, {**TINY, "canteen": CANTEEN})
    direct = with_cutoffs(llm_settings, "sparse", 0.5, direct=0.9)
    kb = build_knowledge_base(direct)
    verbatim = kb.ask("食堂在哪里？", source="wecom")
    assert verbatim.strategy is Strategy.VERBATIM and verbatim.text.endswith(ON_WECOM)
    written = build_knowledge_base(with_cutoffs(llm_settings, "sparse", 0.5)).ask("食堂在哪里", source="wecom")
    assert written.llm_used and written.strategy is Strategy.DIRECT
    prompt = json.dumps([r["body"] for r in llm_server.requests], ensure_ascii=False)
    assert DOCUMENT in prompt and ON_WECOM not in prompt
