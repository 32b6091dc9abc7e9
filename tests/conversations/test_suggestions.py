"""Suggested phrasings from traffic: clarify picks, confirmations and clicked "did you mean" options in the real
conversation log become suggestions with counts; accept adds the phrasing (indexed at once), reject is for good;
the CLI does the same."""

from __future__ import annotations

import json

import pytest

from bot.chat.answer import Strategy
from bot.cli.main import main
from bot.config.settings import CutoffSettings
from bot.config.variants import replace
from bot.conversations.suggestions import labelled_pairs, suggestions
from bot.conversations.turn_log import TurnLog
from bot.factory import build_bot, build_knowledge_base
from tests.support.knowledge import with_thresholds, write_knowledge

pytestmark = pytest.mark.unit

SONGS = {
    "anthem": {"query": "中大的校歌是什么？", "document": "校歌是《中山大学校歌》。", "metadata": "校歌"},
    "second": {"query": "中大的第二校歌是什么？", "document": "第二校歌是《紫荆花开》。", "metadata": "校歌"},
    "library": {
        "query": "图书馆开放时间",
        "document": "图书馆每天早上八点到晚上十点开放。",
        "metadata": "图书馆,开放时间",
    },
}


@pytest.fixture
def traffic_settings(settings, kb_dir):
    write_knowledge(kb_dir, SONGS)
    settings = with_thresholds(settings, "sparse", CutoffSettings(answer=0.5, clarify=0.05))
    return settings


def converse(kb, session: str, *messages: str) -> list:
    """Messages of one conversation through KnowledgeBase.ask (recorded, with the history a front end sends)."""
    history: list[dict] = []
    answers = []
    for message in messages:
        answer = kb.ask(message, list(history), session=session, source="api")
        history += [{"role": "user", "content": message}, {"role": "assistant", "content": answer.text}]
        answers.append(answer)
    return answers


def log_of(kb) -> TurnLog:
    assert kb.recorder.log is not None
    return kb.recorder.log


def test_clarify_picks_become_one_suggestion_with_its_count(traffic_settings):
    kb = build_knowledge_base(traffic_settings)
    bot = kb.bot
    for session in ("a", "b"):
        asked, chosen = converse(kb, session, "校歌是什么", "2")
        assert asked.strategy is Strategy.CLARIFY and chosen.strategy is Strategy.CHOSEN
    second = asked.options[1].id
    converse(kb, "c", "第二校歌是啥")  # asked once, never resolved: no suggestion
    (s,) = suggestions(log_of(kb), bot.index.entries)
    assert (s.question, s.entry_id, s.count, s.sessions, s.via) == ("校歌是什么", second, 2, ("a", "b"), ("clarify",))


def test_a_confirmation_and_a_clicked_did_you_mean_are_suggestions_too(traffic_settings):
    hits, _ = build_bot(traffic_settings).retrieve("图书馆周末几点关门")
    traffic_settings = with_thresholds(
        traffic_settings, "sparse", CutoffSettings(answer=hits[0].relevance + 0.04, confirm=0.05)
    )
    kb = build_knowledge_base(traffic_settings)
    bot = kb.bot
    asked, yes = converse(kb, "a", "图书馆周末几点关门", "是的")
    assert asked.strategy is Strategy.CONFIRM and yes.strategy is Strategy.CHOSEN
    traffic_settings = with_thresholds(traffic_settings, "sparse", CutoffSettings(answer=0.99))
    # a cut this high leaves every candidate out of reach: offer the closest whatever their relevance
    traffic_settings = replace(traffic_settings, "fallback.last_resort.suggestions_reach", 0.0)
    kb = build_knowledge_base(traffic_settings)
    bot = kb.bot
    missed, clicked = converse(kb, "b", "第二首校歌叫什么名字", "中大的第二校歌是什么？")
    assert missed.strategy is Strategy.LAST_RESORT and "中大的第二校歌是什么？" in missed.suggestions
    found = {(s.question, s.entry_id, s.via) for s in suggestions(log_of(kb), bot.index.entries)}
    assert found == {
        ("图书馆周末几点关门", "faq:library", ("confirm",)),
        ("第二首校歌叫什么名字", "faq:second", ("did-you-mean",)),
    }
    assert clicked.hits[0].entry.id == "faq:second"


def test_picks_confirmations_clicks_and_thumbs_up_are_labelled_pairs(traffic_settings):
    hits, _ = build_bot(traffic_settings).retrieve("图书馆周末几点关门")
    near = with_thresholds(traffic_settings, "sparse", CutoffSettings(answer=hits[0].relevance + 0.04, confirm=0.05))
    converse(build_knowledge_base(near), "a", "图书馆周末几点关门", "是的")
    kb = build_knowledge_base(traffic_settings)
    bot = kb.bot
    asked, _ = converse(kb, "b", "校歌是什么", "2")
    (liked,) = converse(kb, "c", "食堂在哪儿")  # not in this knowledge: the library's question is answered below
    (answered,) = converse(kb, "d", "图书馆开放时间")
    assert answered.turn_id is not None and liked.turn_id is not None
    log_of(kb).feedback(answered.turn_id, 1)  # 👍
    log_of(kb).feedback(liked.turn_id, -1)  # 👎: no label
    pairs = {(p.question, p.entry_id, p.via) for p in labelled_pairs(log_of(kb), bot.index.entries)}
    assert pairs == {
        ("图书馆周末几点关门", "faq:library", "confirm"),
        ("校歌是什么", asked.options[1].id, "clarify"),
        ("图书馆开放时间", "faq:library", "thumbs-up"),
    }
    log_of(kb).reject_suggestion("校歌是什么", asked.options[1].id)  # an admin said no: not a label either
    assert len(labelled_pairs(log_of(kb), bot.index.entries)) == 2


def test_accept_adds_the_phrasing_and_reject_is_for_good(traffic_settings, kb_dir):
    kb = build_knowledge_base(traffic_settings)
    bot = kb.bot
    converse(kb, "a", "校歌是什么", "2")
    converse(kb, "b", "校歌", "1")
    pending = suggestions(log_of(kb), bot.index.entries)
    assert len(pending) == 2
    accepted, rejected = pending
    kb.editor.add_phrasing(accepted.entry_id, accepted.question)
    stored = json.loads((kb_dir / "faq.json").read_text(encoding="utf-8"))
    key = accepted.entry_id.split(":")[1]
    assert accepted.question in stored[key]["questions"]
    assert bot.answer(accepted.question).hits[0].entry.id == accepted.entry_id  # indexed: answered, no clarify
    log_of(kb).reject_suggestion(rejected.norm, rejected.entry_id)
    assert suggestions(log_of(kb), bot.index.entries) == []  # the accepted is a phrasing now, the other rejected
    converse(kb, "c", "校歌", "1")  # asked and resolved again: still not suggested
    assert suggestions(TurnLog(log_of(kb).path), bot.index.entries) == []


def test_cli_lists_accepts_and_rejects(traffic_settings, capsys, tmp_path):
    import yaml

    kb = build_knowledge_base(traffic_settings)
    converse(kb, "a", "校歌是什么", "2")
    converse(kb, "b", "校歌", "1")
    config = tmp_path / "cli.yaml"
    raw = traffic_settings.model_dump(mode="json", exclude={"base_dir", "source"})
    config.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    assert main(["--config", str(config), "knowledge", "suggestions", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {s["question"] for s in listed} == {"校歌", "校歌是什么"}
    assert main(["--config", str(config), "knowledge", "suggestions", "--accept", "1"]) == 0
    assert "已采纳 / Accepted" in capsys.readouterr().out
    assert main(["--config", str(config), "knowledge", "suggestions", "--reject", "1"]) == 0
    assert main(["--config", str(config), "knowledge", "suggestions", "--reject", "5"]) == 2
    assert "no suggestion 5" in capsys.readouterr().err
    assert main(["--config", str(config), "knowledge", "suggestions", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
