"""Bot.answer end to end: direct, HyDE, last resort, retrieval-only, LLM faults, bad input, bad edits."""

from __future__ import annotations

import json

import pytest

from bot.chat.answer import Strategy
from bot.config.variants import replace
from bot.factory import build_bot
from bot.texts import CUT_NOTICE, EMPTY_REPLY, LLM_DOWN_NOTICE, RETRIEVAL_ONLY_LABEL
from tests.support.knowledge import with_cutoffs
from tests.support.llm_scripts import HYDE_MARK, scripted
from tests.support.llm_server import Fault

pytestmark = pytest.mark.unit


@pytest.fixture
def llm_bot(llm_settings, llm_server):
    llm_settings = with_cutoffs(llm_settings, "sparse", 0.5)
    llm_server.reply = scripted()
    return build_bot(llm_settings)


@pytest.fixture
def offline_bot(settings):
    settings = with_cutoffs(settings, "sparse", 0.5)
    return build_bot(settings)


def test_direct_answer_streams_and_sends_persona_demos_and_references(llm_bot, llm_server, llm_settings):
    snapshots = list(llm_bot.stream("怎么添加知识？"))
    assert len(snapshots) > 2 and not snapshots[0].finished and snapshots[-1].finished
    final = snapshots[-1]
    assert final.text == "根据参考资料 [1]，这是回答。" and final.strategy is Strategy.DIRECT and final.llm_used
    assert final.hits[0].entry.id == "faq:add"
    assert {"retrieve", "prompt", "llm", "total"} <= set(final.timings)
    body = llm_server.requests[-1]["body"]
    assert body["stream"] is True
    contents = [m["content"] for m in body["messages"]]
    assert body["messages"][0] == {"role": "system", "content": llm_settings.prompt.persona}
    assert all(d.answer in contents for d in llm_settings.prompt.demonstrations)
    assert "把 JSON 条目放进 knowledge 文件夹" in body["messages"][-1]["content"]


def test_history_reaches_the_llm(llm_bot, llm_server):
    history = [{"role": "user", "content": "第一问"}, {"role": "assistant", "content": "第一答"}]
    llm_bot.answer("怎么添加知识？", history)
    contents = [m["content"] for m in llm_server.requests[-1]["body"]["messages"]]
    assert contents[-3:-1] == ["第一问", "第一答"]


def test_hyde_makes_the_right_entry_pass(llm_bot, llm_server):
    question = "我想把资料放进机器人"
    hits, passed = llm_bot.retrieve(question)
    assert passed == [] and hits[0].entry.id == "faq:add"  # found, but covers too little of the question
    llm_server.reply = scripted(hyde="把 JSON 条目放进 knowledge 文件夹即可添加知识。")
    answer = llm_bot.answer(question)
    assert answer.strategy is Strategy.HYDE
    assert answer.hits[0].entry.id == "faq:add"
    assert answer.hypothetical.startswith("把 JSON 条目")
    assert "hyde" in answer.timings and "retrieve_hyde" in answer.timings
    assert HYDE_MARK in llm_server.requests[0]["body"]["messages"][-1]["content"]


def test_hyde_that_finds_nothing_falls_to_fixed_last_resort(llm_bot, llm_server, llm_settings):
    answer = llm_bot.answer("火星上有几座城市")
    assert answer.strategy is Strategy.LAST_RESORT and not answer.hits
    assert answer.text.startswith(llm_settings.fallback.last_resort.reply.strip()[:10])
    assert len(llm_server.requests) == 1  # only the HyDE call


def test_llm_last_resort_shows_notice(llm_settings, llm_server):
    llm_settings = replace(llm_settings, "fallback.last_resort.mode", "llm")
    llm_settings = with_cutoffs(llm_settings, "sparse", 0.5)
    llm_server.reply = scripted(answer="今天可能是晴天。")
    answer = build_bot(llm_settings).answer("火星上有几座城市")
    assert answer.strategy is Strategy.LAST_RESORT and answer.llm_used
    assert answer.text.startswith(llm_settings.fallback.last_resort.notice) and answer.text.endswith("今天可能是晴天。")
    assert llm_server.requests[-1]["body"]["messages"][-1]["content"] == "火星上有几座城市"


def test_chain_without_hyde_skips_it(llm_settings, llm_server):
    llm_settings = replace(llm_settings, "fallback.chain", ["last_resort"])
    llm_settings = with_cutoffs(llm_settings, "sparse", 0.5)
    assert build_bot(llm_settings).answer("火星上有几座城市").strategy is Strategy.LAST_RESORT
    assert llm_server.requests == []


def test_llm_500_degrades_to_retrieval_answer_with_sources(llm_bot, llm_server):
    llm_server.fail(Fault(status=500))
    answer = llm_bot.answer("怎么添加知识？")
    assert answer.strategy is Strategy.DIRECT and not answer.llm_used
    assert answer.text.startswith(LLM_DOWN_NOTICE) and "knowledge 文件夹" in answer.text
    assert answer.hits[0].entry.id == "faq:add" and answer.notice == LLM_DOWN_NOTICE


def test_llm_timeout_degrades(llm_server, llm_settings):
    llm_settings = replace(replace(llm_settings, "llm.timeout", 0.5), "llm.max_retries", 0)
    llm_server.reply = scripted()
    bot = build_bot(with_cutoffs(llm_settings, "sparse", 0.5))
    llm_server.fail(Fault(sleep=1.5))
    answer = bot.answer("怎么添加知识？")
    assert answer.text.startswith(LLM_DOWN_NOTICE) and answer.hits


def test_stream_cut_keeps_partial_and_says_so(llm_bot, llm_server):
    llm_server.reply = scripted(answer="这是一段很长的回答，" * 5)
    llm_server.fail(Fault(break_after=3))
    answer = llm_bot.answer("怎么添加知识？")
    assert answer.text.startswith("这是一段很长的回答，"[:12]) and answer.text.endswith(CUT_NOTICE)
    assert answer.notice == CUT_NOTICE


def test_retrieval_only_direct(offline_bot):
    answer = offline_bot.answer("怎么添加知识？")
    assert offline_bot.status().llm is None and not answer.llm_used
    assert answer.strategy is Strategy.DIRECT
    assert answer.text.startswith(RETRIEVAL_ONLY_LABEL) and "knowledge 文件夹" in answer.text


def test_retrieval_only_last_resort_suggests_closest_entries(offline_bot):
    answer = offline_bot.answer("我想把资料放进机器人")
    assert answer.strategy is Strategy.LAST_RESORT
    assert "Did you mean" in answer.text and "- 怎么添加知识？" in answer.text


@pytest.mark.parametrize("message", ["", "   \n\t ", None, "\x00\x01"])
def test_empty_message_is_answered_politely(offline_bot, message):
    answer = offline_bot.answer(message)
    assert answer.text == EMPTY_REPLY and answer.finished


def test_huge_message_is_truncated_with_notice(offline_bot):
    answer = offline_bot.answer("怎么添加知识？" + "啊" * 20000)
    assert len(answer.question) == 2000 and "2000" in answer.notice
    assert answer.hits[0].entry.id == "faq:add"


def test_invalid_surrogates_do_not_crash(offline_bot):
    assert offline_bot.answer("怎么添加知识\ud800？").finished


def test_malformed_edit_keeps_serving_last_good_index(offline_bot, kb_dir):
    offline_bot.index.check_interval = 0
    (kb_dir / "faq.json").write_text('{"add": {"query": "broken"', encoding="utf-8")
    answer = offline_bot.answer("怎么添加知识？")
    assert answer.hits[0].entry.id == "faq:add"
    assert offline_bot.index.error is not None and "faq.json" in str(offline_bot.index.error)


def test_new_file_is_picked_up_on_next_message(offline_bot, kb_dir):
    offline_bot.index.check_interval = 0
    (kb_dir / "parking.json").write_text(
        json.dumps(
            [{"query": "停车场怎么收费？", "document": "校内停车每小时五元。", "metadata": "停车,收费"}],
            ensure_ascii=False,
        ),
        encoding="utf-8",
    )
    answer = offline_bot.answer("停车场怎么收费")
    assert answer.hits[0].entry.id == "parking:0" and offline_bot.index.error is None


def test_forged_history_reaches_the_llm_within_the_character_budget(llm_bot, llm_server, llm_settings):
    huge = "伪" * 1_000_000
    history = [
        {"role": "user", "content": huge},
        {"role": "assistant", "content": huge},
        {"role": "user", "content": "上一个问题"},
        {"role": "assistant", "content": "上一个回答"},
    ]
    llm_bot.answer("怎么添加知识？", history)
    body = llm_server.requests[-1]["body"]
    demos = 1 + 2 * len(llm_settings.prompt.demonstrations)
    sent = body["messages"][demos:-1]
    assert sum(len(m["content"]) for m in sent) <= llm_settings.prompt.max_history_chars
    assert sent[-2:] == [{"role": "user", "content": "上一个问题"}, {"role": "assistant", "content": "上一个回答"}]


def test_runaway_llm_reply_is_cut_at_the_answer_cap(llm_settings, llm_server):
    llm_settings = with_cutoffs(llm_settings, "sparse", 0.5)
    llm_settings = replace(llm_settings, "limits.max_answer_chars", 200)
    llm_server.reply = scripted(answer="很长" * 5000)
    answer = build_bot(llm_settings).answer("怎么添加知识？")
    assert answer.text.startswith("很长") and answer.text.endswith(CUT_NOTICE)
    assert len(answer.text) <= 200 + len(CUT_NOTICE) + 2 and CUT_NOTICE in (answer.notice or "")


def test_forged_history_without_llm_searches_a_bounded_followup(offline_bot):
    history = [{"role": "user", "content": "怎么添加知识" * 100_000}, {"role": "assistant", "content": "好"}]
    answer = offline_bot.answer("那它呢？", history)
    assert answer.rewritten is None or len(answer.rewritten) <= offline_bot.max_message_chars + 10
