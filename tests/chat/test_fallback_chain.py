"""Multi-query rewrite (a fallback step) and LLM relevance grading, against the local OpenAI-compatible server."""

from __future__ import annotations

import json
import logging
import re

import pytest
import yaml

from bot.chat.answer import Strategy
from bot.chat.grading import GradingFailed, parse_grades
from bot.chat.rewrite import parse_phrasings
from bot.config.settings import load_settings
from bot.config.variants import replace
from bot.errors import ConfigError
from bot.factory import build_bot
from tests.support.knowledge import config_dict, with_cutoffs
from tests.support.llm_scripts import ANSWER, HARD, grade_by_title, kind
from tests.support.llm_server import Fault

pytestmark = pytest.mark.unit


def scripted(rewrite: str = "今天的天气如何\n天气预报", hyde: str = "不知道", grade=None):
    """A reply function by request kind; ``grade`` maps the grading request's body to its reply."""

    def reply(body):
        name = kind(body)
        if name == "grade":
            return grade(body)
        return {"rewrite": rewrite, "hyde": hyde}.get(name, ANSWER)

    return reply


def kinds(server) -> list[str]:
    """The kinds of the requests the server received, in order."""
    return [kind(r["body"]) for r in server.requests]


@pytest.fixture
def chain_settings(llm_settings):
    llm_settings = with_cutoffs(llm_settings, "sparse", 0.5)
    llm_settings = replace(llm_settings, "fallback.chain", ["rewrite", "hyde", "last_resort"])
    return llm_settings


def test_rewrite_that_finds_the_entry_answers_and_names_the_phrasing(chain_settings, llm_server):
    llm_server.reply = scripted(rewrite="改写后的问题：\n1. 怎么添加知识？\n2. 如何往知识库里加资料")
    answer = build_bot(chain_settings).answer(HARD)
    assert answer.strategy is Strategy.REWRITE and answer.llm_used and answer.text == ANSWER
    assert answer.phrasings == ("怎么添加知识？", "如何往知识库里加资料")
    best = answer.hits[0]
    assert best.entry.id == "faq:add" and best.subquestion == "怎么添加知识？" and best.relevance >= 0.5
    data = answer.to_dict()
    assert data["strategy"] == "rewrite" and data["phrasings"] == list(answer.phrasings)
    assert data["hits"][0]["subquestion"] == "怎么添加知识？"
    assert {"rewrite_phrasings", "retrieve_rewrite"} <= set(answer.timings)
    assert kinds(llm_server) == ["rewrite", "answer"]  # HyDE never ran
    prompt = llm_server.requests[0]["body"]["messages"][-1]["content"]
    assert HARD in prompt and "3 different ways" in prompt


def test_rewrite_shows_in_the_sources_panel(chain_settings, llm_server):
    from bot.ui.render import sources_html

    llm_server.reply = scripted(rewrite="怎么添加知识？")
    html = sources_html(build_bot(chain_settings).answer(HARD))
    assert "multi-query rewrite" in html and "↳ 怎么添加知识？" in html
    assert "Phrasings searched:</b> 怎么添加知识？" in html  # every phrasing the LLM wrote, found or not


@pytest.mark.parametrize(
    "chain, expected",
    [
        (["rewrite", "hyde", "last_resort"], ["rewrite", "hyde"]),
        (["hyde", "rewrite", "last_resort"], ["hyde", "rewrite"]),
        (["rewrite", "last_resort", "hyde"], ["rewrite"]),
    ],
)
def test_chain_order_is_the_request_order(chain_settings, llm_server, chain, expected):
    chain_settings = replace(chain_settings, "fallback.chain", chain)
    llm_server.reply = scripted()
    answer = build_bot(chain_settings).answer("火星上有几座城市")
    assert answer.strategy is Strategy.LAST_RESORT and not answer.hits
    assert kinds(llm_server) == expected
    assert answer.phrasings == ("今天的天气如何", "天气预报")


def test_rewrite_that_fails_moves_on_to_the_next_step(chain_settings, llm_server):
    llm_server.reply = scripted(hyde="把 JSON 条目放进 knowledge 文件夹即可添加知识。")
    llm_server.fail(Fault(status=500))
    answer = build_bot(chain_settings).answer(HARD)
    assert answer.strategy is Strategy.HYDE and answer.phrasings == ()
    assert kinds(llm_server) == ["rewrite", "hyde", "answer"]


def test_rewrite_is_skipped_without_an_llm(settings, llm_server):
    settings = replace(settings, "llm.base_url", llm_server.url)  # no key in the environment: retrieval-only
    settings = replace(settings, "fallback.chain", ["rewrite", "hyde", "last_resort"])
    settings = with_cutoffs(settings, "sparse", 0.5)
    bot = build_bot(settings)
    answer = bot.answer(HARD)
    assert bot.search.multi_query is None and answer.strategy is Strategy.LAST_RESORT and answer.phrasings == ()
    assert llm_server.requests == []


@pytest.mark.parametrize(
    "chain, message",
    [
        (
            ["rewrite", "hyd", "last_resort"],
            "unknown fallback step(s) 'hyd'; use: translate, rewrite, hyde, last_resort",
        ),
        (["hyde", "hyde", "last_resort"], "fallback step(s) hyde listed more than once"),
    ],
)
def test_bad_chain_step_is_a_config_error(tmp_path, kb_dir, chain, message):
    raw = config_dict(tmp_path, kb_dir)
    raw["fallback"]["chain"] = chain
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_settings(path)
    assert "fallback.chain" in str(err.value) and message in str(err.value)


def test_template_with_an_unknown_field_is_a_config_error(tmp_path, kb_dir):
    raw = config_dict(tmp_path, kb_dir)
    raw["retrieval"]["grading"]["template"] = 'Reply {"grades": []} for {question}'
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    with pytest.raises(ConfigError, match="retrieval.grading.template"):
        load_settings(path)


# -- grading ---------------------------------------------------------------------------------------------------


@pytest.fixture
def grading_settings(llm_settings):
    llm_settings = with_cutoffs(llm_settings, "sparse", 0.5)
    llm_settings = replace(llm_settings, "retrieval.grading.enabled", True)
    llm_settings = replace(llm_settings, "retrieval.grading.candidates", 3)
    llm_settings = replace(llm_settings, "retrieval.grading.weight", 0.5)
    llm_settings = replace(llm_settings, "fallback.chain", ["last_resort"])
    return llm_settings


def test_grading_lifts_a_useful_candidate_over_the_threshold(grading_settings, llm_server):
    bot = build_bot(grading_settings)
    hits, passed = bot.retrieve(HARD)
    assert not passed and hits[0].entry.id == "faq:add"
    retrieval = hits[0].relevance
    llm_server.reply = scripted(grade=grade_by_title("怎么添加知识？"))
    answer = bot.answer(HARD)
    assert kinds(llm_server) == ["grade", "answer"]
    request = llm_server.requests[0]["body"]["messages"][-1]["content"]
    assert json.dumps(HARD, ensure_ascii=False) in request
    listed = re.findall(r'^\[(\d+)\] "(.*?)":', request, re.MULTILINE)
    assert listed == [(str(n), h.entry.query) for n, h in enumerate(hits[:3], 1)]  # every candidate, numbered
    assert answer.strategy is Strategy.DIRECT and answer.text == ANSWER
    best = answer.hits[0]
    assert best.entry.id == "faq:add" and best.relevance == pytest.approx(0.5 * retrieval + 0.5)
    assert best.signals["llm_grade"] == 1.0 and best.signals["retrieval"] == pytest.approx(retrieval)
    assert answer.to_dict()["hits"][0]["signals"]["llm_grade"] == 1.0 and "grade" in answer.timings
    from bot.ui.render import sources_html

    assert "大模型评分 LLM grade 1" in sources_html(answer)


def test_grading_can_sink_a_hit_below_the_threshold(grading_settings, llm_server):
    grading_settings = replace(
        grading_settings, "retrieval.grading.weight", 0.6
    )  # even a relevance of 1 ends below 0.5
    llm_server.reply = scripted(grade=grade_by_title("no such title"))
    answer = build_bot(grading_settings).answer("怎么切换检索模式？")
    assert answer.strategy is Strategy.LAST_RESORT and not answer.hits
    assert all(h.signals.get("llm_grade") in (None, 0.0) for h in answer.candidates)


@pytest.mark.parametrize(
    "reply, fault",
    [
        ("都很有用！", None),  # no JSON at all
        ('{"grades": [{"n": 1, "grade": 0.9}]}', None),  # incomplete
        ('{"grades": [{"n": 1, "grade": 7}, {"n": 2, "grade": 0}, {"n": 3, "grade": 0}]}', None),  # out of range
        ('{"grades": "good"}', None),
        ("", Fault(status=500)),  # the LLM fails
    ],
)
def test_broken_grading_keeps_the_retrieval_relevances(grading_settings, llm_server, caplog, reply, fault):
    bot = build_bot(grading_settings)
    _, expected = bot.retrieve("怎么添加知识？")
    llm_server.reply = scripted(grade=lambda body: reply)
    if fault:
        llm_server.fail(fault)
    with caplog.at_level(logging.WARNING, logger="bot.chat.grading"):
        answer = bot.answer("怎么添加知识？")
    assert kinds(llm_server) == ["grade", "answer"]
    assert answer.strategy is Strategy.DIRECT and answer.text == ANSWER
    assert [(h.entry.id, h.relevance) for h in answer.hits] == [(h.entry.id, h.relevance) for h in expected]
    assert all("llm_grade" not in h.signals for h in answer.candidates)
    assert "relevance grading failed" in caplog.text


def test_grading_is_off_by_default_and_without_an_llm(settings, llm_server):
    settings = replace(settings, "llm.base_url", llm_server.url)
    settings = replace(settings, "retrieval.grading.enabled", True)
    assert build_bot(settings).search.grader is None  # no key: retrieval-only
    settings = replace(settings, "retrieval.grading.enabled", False)
    assert load_settings(settings.source).retrieval.grading.enabled is False


# -- parsing ---------------------------------------------------------------------------------------------------


def test_parse_grades_accepts_chatter_fences_and_plain_lists():
    assert parse_grades('Sure! {"note": 1} {"grades": [{"n": 2, "grade": 0}, {"n": 1, "grade": 1}]}', 2) == [1.0, 0.0]
    assert parse_grades('```json\n{"grades": [0.2, 0.8]}\n```', 2) == [0.2, 0.8]
    for bad in ["", "{", '{"grades": [{"n": 1, "grade": true}]}', '{"grades": [{"n": "1", "grade": 1}]}']:
        with pytest.raises(GradingFailed):
            parse_grades(bad, 1)


def test_parse_phrasings_strips_markers_and_skips_the_question_and_repeats():
    reply = (
        '改写：\n1. 如何添加知识？\n2) "怎样往知识库加内容"\n- 如何添加知识？\n（4）怎么添加知识？\n3.5 版本怎么加\n'
    )
    assert parse_phrasings(reply, "怎么添加知识？", 5) == ["如何添加知识？", "怎样往知识库加内容", "3.5 版本怎么加"]
    assert parse_phrasings(reply, "怎么添加知识？", 1) == ["如何添加知识？"]
