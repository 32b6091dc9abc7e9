"""Strategy.VERBATIM: an entry so close to the question that its document is the reply, labelled, without the LLM.

Every test runs against the local LLM server (real HTTP), so "the LLM was not called" is checked by the
server's own request log, not by a mock.
"""

from __future__ import annotations

import pytest

from bot.chat.answer import Strategy
from bot.config.variants import update
from bot.factory import build_bot
from bot.texts import RETRIEVAL_ONLY_LABEL, VERBATIM_LABEL
from bot.ui.render import sources_html
from tests.support.knowledge import TINY, with_cutoffs, write_knowledge
from tests.support.llm_scripts import scripted

pytestmark = pytest.mark.unit

LLM_REPLY = "根据参考资料 [1]，这是回答。"


@pytest.fixture
def make_bot(llm_settings, llm_server):
    """A bot on the local LLM with sparse thresholds answer 0.5 and the given ``direct``."""
    llm_server.reply = scripted(answer=LLM_REPLY)

    def make(direct: float | None, **retrieval):
        s = with_cutoffs(llm_settings, "sparse", 0.5, direct)
        return build_bot(update(s, {f"retrieval.{k}": v for k, v in retrieval.items()}))

    return make


def test_the_exact_question_of_an_entry_is_answered_verbatim_without_the_llm(make_bot, llm_server):
    bot = make_bot(direct=0.9)
    snapshots = list(bot.stream(TINY["add"]["query"]))
    answer = snapshots[-1]
    assert answer.finished and answer.strategy is Strategy.VERBATIM and not answer.llm_used
    assert answer.text.startswith(VERBATIM_LABEL) and TINY["add"]["document"] in answer.text
    assert [h.entry.id for h in answer.hits] == ["faq:add"] and answer.hits[0].relevance >= 0.9
    assert answer.thresholds.direct == 0.9 and "direct ≥ 0.9" in answer.thresholds.describe()
    assert llm_server.requests == []  # the server saw nothing: no rewrite, no HyDE, no answer call
    assert "verbatim" in sources_html(answer)


def test_direct_null_never_answers_verbatim(make_bot, llm_server):
    answer = make_bot(direct=None).answer(TINY["add"]["query"])
    assert answer.strategy is Strategy.DIRECT and answer.llm_used and answer.text == LLM_REPLY
    assert answer.hits[0].entry.id == "faq:add" and answer.hits[0].relevance == pytest.approx(1.0)
    assert len(llm_server.requests) == 1 and VERBATIM_LABEL not in answer.text


def test_a_hit_that_passes_but_is_below_direct_goes_to_the_llm(make_bot, llm_server):
    bot = make_bot(direct=0.9)
    _, passed = bot.retrieve("图书馆几点开放")
    assert passed and 0.5 <= passed[0].relevance < 0.9
    answer = bot.answer("图书馆几点开放")
    assert answer.strategy is Strategy.DIRECT and answer.llm_used and len(llm_server.requests) == 1


def test_a_split_message_never_answers_verbatim(make_bot, llm_server):
    bot = make_bot(direct=0.9)
    message = f"{TINY['add']['query']}{TINY['canteen']['query']}"  # "怎么添加知识？食堂在哪里？": two exact queries
    assert len(bot.search.splitter.split(message)) == 2
    _, passed = bot.retrieve(message)
    assert {"faq:add", "faq:canteen"} <= {h.entry.id for h in passed if h.relevance >= 0.9}
    answer = bot.answer(message)
    assert answer.strategy is Strategy.DIRECT and answer.llm_used and len(llm_server.requests) == 1


def test_a_split_message_whose_best_hit_only_the_whole_message_found_is_not_verbatim(make_bot, llm_server, kb_dir):
    # One entry covers both parts; with top_k 1 each part finds its own entry, so this one is found only by the
    # search for the whole message and carries no sub-question label. The message was still split.
    write_knowledge(
        kb_dir,
        {
            "map": {
                "query": "校园地图",
                "document": "图书馆几点开放、食堂在哪里，都可以在校园地图上查到。",
                "metadata": "地图",
            }
        },
        "campus.json",
    )
    bot = make_bot(direct=0.9, top_k=1)
    message = "图书馆几点开放？食堂在哪里"
    hits, _ = bot.retrieve(message)
    assert hits[0].entry.id == "campus:map" and hits[0].relevance >= 0.9 and hits[0].subquestion == ""
    answer = bot.answer(message)
    assert answer.strategy is Strategy.DIRECT and answer.llm_used and VERBATIM_LABEL not in answer.text
    assert len(llm_server.requests) == 1


def test_hyde_hits_are_never_answered_verbatim(make_bot, llm_server):
    llm_server.reply = scripted(hyde="把 JSON 条目放进 knowledge 文件夹即可添加知识。", answer=LLM_REPLY)
    bot = make_bot(direct=0.5)  # as low as the answer threshold: any hit that passes would be "direct"
    answer = bot.answer("我想把资料放进机器人")
    assert answer.strategy is Strategy.HYDE and answer.hits[0].relevance >= 0.5
    assert answer.llm_used and answer.text == LLM_REPLY and len(llm_server.requests) == 2  # HyDE, then the answer


def test_without_an_llm_the_reply_is_labelled_retrieval_only(settings):
    settings = with_cutoffs(settings, "sparse", 0.5, 0.9)
    answer = build_bot(settings).answer(TINY["add"]["query"])
    assert answer.strategy is Strategy.DIRECT and answer.text.startswith(RETRIEVAL_ONLY_LABEL)
