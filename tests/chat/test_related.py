"""Related questions after an answer: the entry's ``related`` ids first, then what visitors asked next in the
real conversation log, then the index's nearest neighbours; never the answered entry, never outside the category
filter; and ``related`` ids validated like every other field of an entry."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bot.chat.answer import Answer, Decision, Strategy
from bot.chat.related import RelatedQuestions
from bot.config.variants import replace
from bot.conversations.asking import NextAsked
from bot.errors import KnowledgeError
from bot.factory import build_bot, build_knowledge_base
from bot.knowledge.entries import Entry, entry_from_record, entry_record, load_entries, write_entries
from bot.knowledge.filters import EntryFilter, entry_filter
from bot.knowledge.store import KnowledgeStore
from bot.search.base import Hit
from tests.support.answers import hit
from tests.support.knowledge import TINY, with_cutoffs, write_knowledge

pytestmark = pytest.mark.unit

CAMPUS: dict[str, dict[str, Any]] = {
    "library": {"query": "图书馆几点开门？", "document": "图书馆早上八点开门。", "categories": "校园"},
    "card": {
        "query": "校园卡丢了怎么办？",
        "document": "到一卡通中心挂失补办。",
        "categories": "校园",
        "related": ["library", "faq:canteen"],
    },
    "gym": {"query": "体育馆几点关门？", "document": "体育馆晚上九点关门。", "categories": "体育"},
    "pool": {"query": "游泳馆几点开门？", "document": "游泳馆下午两点开门。", "categories": "体育"},
}


@pytest.fixture
def kb(settings, kb_dir):
    write_knowledge(kb_dir, CAMPUS, name="campus.json")
    settings = replace(with_cutoffs(settings, "sparse", 0.3), "ui.examples", [])
    return build_knowledge_base(settings, build_bot(settings))


def related_ids(answer) -> list[str]:
    return [o.id for o in answer.related]


def test_the_entry_s_related_ids_come_first_as_their_questions(kb):
    answer = kb.ask("校园卡丢了怎么办？", source="web", session="s1")
    assert answer.decision is Decision.ANSWER and answer.hits[0].entry.id == "campus:card"
    assert related_ids(answer)[:2] == ["campus:library", "faq:canteen"]  # a bare key is of the same file
    assert [o.question for o in answer.related][:2] == ["图书馆几点开门？", "食堂在哪里？"]
    assert len(answer.related) == 3 and "campus:card" not in related_ids(answer)


def test_what_visitors_asked_next_in_the_log_comes_before_neighbours(kb):
    # In three conversations, the pool was asked right after the gym; in another, the library after the gym.
    for n in range(3):
        kb.ask("体育馆几点关门？", source="web", session=f"pool-{n}")
        kb.ask("游泳馆几点开门？", source="web", session=f"pool-{n}")
    kb.ask("体育馆几点关门？", source="web", session="lib")
    kb.ask("图书馆几点开门？", source="web", session="lib")
    kb.ask("怎么添加知识？", source="web", session="other")  # another conversation's next turn does not count
    kb.related.next_asked.forget()
    answer = kb.ask("体育馆几点关门？", source="web", session="new")
    assert related_ids(answer)[:2] == ["campus:pool", "campus:library"]
    assert "campus:gym" not in related_ids(answer)


def test_without_related_ids_or_log_the_nearest_neighbours_fill_in(kb):
    answer = kb.ask("体育馆几点关门？", source="web", session="fresh")
    assert answer.hits[0].entry.id == "campus:gym"
    ids = related_ids(answer)
    assert 0 < len(ids) <= 3 and "campus:gym" not in ids
    assert ids[0] in ("campus:pool", "campus:library")  # both ask 几点开门 / 几点关门: the closest texts


def test_the_category_filter_holds_for_every_source(kb):
    within = entry_filter(["校园"])
    answer = kb.ask("校园卡丢了怎么办？", within=within, source="web", session="cat")
    # faq:canteen is listed in ``related`` but outside the filter; the sports entries are never offered either
    assert related_ids(answer) == ["campus:library"]


def test_no_related_questions_unless_the_knowledge_answered(kb):
    assert kb.ask("火星上有几座城市？", source="web", session="miss").related == ()
    assert kb.ask("你好", source="web", session="hello").related == ()


def test_a_draft_is_never_offered(kb, kb_dir):
    campus = dict(CAMPUS, library={**CAMPUS["library"], "draft": True})
    write_knowledge(kb_dir, campus, name="campus.json")
    kb.index.refresh(force=True, wait=True)
    answer = kb.ask("校园卡丢了怎么办？", source="web", session="draft")
    assert "campus:library" not in related_ids(answer) and related_ids(answer)[0] == "faq:canteen"


def test_the_api_protocol_and_the_record_carry_them(kb):
    answer = kb.ask("校园卡丢了怎么办？", source="api")
    assert answer.to_dict()["related"][0] == {"id": "campus:library", "question": "图书馆几点开门？"}


@pytest.mark.parametrize(
    ("related", "why"),
    [
        (["nope"], "'related' names an unknown entry 'campus:nope'"),
        (["faq:nope"], "'related' names an unknown entry 'faq:nope'"),
        (["card"], "'related' lists the entry itself"),
        ("library", "'related' must be a list of strings"),
        ([""], "'related' contains an empty string"),
    ],
)
def test_bad_related_ids_are_knowledge_errors_naming_file_and_entry(kb_dir, related, why):
    write_knowledge(kb_dir, {"card": {**CAMPUS["card"], "related": related}}, name="campus.json")
    with pytest.raises(KnowledgeError) as caught:
        load_entries(kb_dir)
    (problem,) = caught.value.problems
    assert problem.file.endswith("campus.json") and problem.entry == "card" and why in problem.problem


def test_related_ids_survive_records_and_written_files(kb_dir, tmp_path):
    write_knowledge(kb_dir, CAMPUS, name="campus.json")
    entries = load_entries(kb_dir)
    card = next(e for e in entries if e.id == "campus:card")
    assert card.related == ("campus:library", "faq:canteen")
    assert entry_from_record(entry_record(card)) == card
    write_entries(entries, tmp_path / "copy")
    assert next(e for e in load_entries(tmp_path / "copy") if e.id == "campus:card").related == card.related
    stored = json.loads((tmp_path / "copy" / "campus.json").read_text(encoding="utf-8"))
    assert stored["card"]["related"] == ["campus:library", "faq:canteen"]
    assert "related" not in stored["library"] and TINY  # absent stays absent


def test_neighbours_are_searched_once_per_entry_until_the_knowledge_changes():
    gym, pool, court = (Entry(f"c:{k}", q, "…") for k, q in (("gym", "体育馆"), ("pool", "游泳馆"), ("court", "球场")))
    knowledge = [[gym, pool]]
    searched: list[str] = []

    def neighbours(query: str, within: EntryFilter | None) -> list[Hit]:
        searched.append(query)
        return [hit(e, 0.5) for e in knowledge[0]]

    related = RelatedQuestions(lambda: knowledge[0], NextAsked(None), neighbours)
    answer = Answer("体育馆？", "…", Strategy.DIRECT, "sparse", hits=[hit(gym, 0.9)])
    assert [o.id for o in related.of(answer)] == ["c:pool"]
    assert [o.id for o in related.of(answer)] == ["c:pool"] and searched == ["体育馆"]  # remembered
    knowledge[0] = [gym, pool, court]  # a new knowledge snapshot: searched again
    assert [o.id for o in related.of(answer)] == ["c:pool", "c:court"] and len(searched) == 2


def test_a_write_that_would_break_a_related_id_is_refused_and_changes_nothing(kb_dir, tmp_path):
    write_knowledge(kb_dir, CAMPUS, name="campus.json")
    store = KnowledgeStore(kb_dir, tmp_path / "locks")
    before = {p.name: p.read_bytes() for p in kb_dir.glob("*.json")}
    with pytest.raises(KnowledgeError) as caught:  # faq:canteen is listed by campus:card
        store.delete_entry("faq.json", "canteen")
    assert "faq:canteen is listed in 'related' of campus:card" in str(caught.value)
    with pytest.raises(KnowledgeError) as caught:
        store.import_file("more.json", json.dumps({"x": {"query": "问", "document": "答", "related": ["faq:nope"]}}))
    assert "more.json entry 'x'" in str(caught.value) and "unknown entry 'faq:nope'" in str(caught.value)
    assert {p.name: p.read_bytes() for p in kb_dir.glob("*.json")} == before
    store.delete_entry("faq.json", "mode")  # listed by nobody: deleted
    assert store.import_file("more.json", json.dumps({"x": {"query": "问", "document": "答", "related": ["faq:add"]}}))
    assert len(load_entries(kb_dir)) == len(TINY) - 1 + len(CAMPUS) + 1
