"""The Searcher contract: every implementation must pass this suite on the same tiny knowledge base.

To add a backend, add a builder to ``BUILDERS``: ``(path, tokenizer) -> Searcher`` that reopens the
same on-disk (or remote) index when called twice with the same path.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

import pytest

from bot.knowledge import Entry, load_entries
from bot.search.base import Searcher
from bot.search.tantivy_searcher import TantivySearcher
from tests.conftest import TINY, write_knowledge
from tests.es_server import contract_builder as es_contract_builder


def tantivy_builder(path: Path, tokenizer) -> Searcher:
    return TantivySearcher(path / "tantivy", tokenizer, {"query": 3.0, "metadata": 2.0, "document": 1.0})


def faiss_builder(path: Path, tokenizer) -> Searcher:
    from bot.encoders import FastTextEncoder, FastTextParams
    from bot.search.faiss_searcher import FaissSearcher

    # fastText trained on 6 entries: small dim, many epochs, and SIF a=1 (plain mean; with ~120 training
    # tokens a=1e-3 would weight every unseen word 10x a seen one). retrain_after keeps the model across
    # the suite's one-entry edits, so sync stays incremental (the default retrains on any change = rebuild).
    encoder = FastTextEncoder(tokenizer, path / "fasttext", params=FastTextParams(dim=32, epoch=50, bucket=20_000),
                              sif_a=1.0, retrain_after=0.5)
    return FaissSearcher(path / "faiss", encoder, "{query} {metadata}")


def hybrid_builder(path: Path, tokenizer) -> Searcher:
    from bot.search.hybrid import HybridSearcher

    return HybridSearcher(tantivy_builder(path, tokenizer), faiss_builder(path, tokenizer))


BUILDERS: dict[str, Callable[[Path, object], Searcher]] = {
    "tantivy": tantivy_builder, "faiss": faiss_builder, "hybrid": hybrid_builder,
}
# The same suite on an in-memory ES-API server (osmem-server); skipped when it is not installed.
BUILDERS["elasticsearch"] = es_contract_builder


def register(name: str, builder: Callable[[Path, object], Searcher]) -> None:
    """Let other test modules run this suite against their backend."""
    BUILDERS[name] = builder


@pytest.fixture(params=sorted(BUILDERS))
def make(request, tmp_path, tokenizer):
    builder = BUILDERS[request.param]
    return lambda: builder(tmp_path, tokenizer)


@pytest.fixture
def entries(tmp_path) -> list[Entry]:
    return load_entries(write_knowledge(tmp_path / "kb", TINY).parent)


@pytest.fixture
def searcher(make, entries) -> Searcher:
    s = make()
    report = s.sync(entries)
    assert report.added == len(entries)
    return s


def ids(hits) -> list[str]:
    return [h.entry.id for h in hits]


def test_best_match_first_and_scores_descending(searcher):
    hits = searcher.search("怎么添加知识", 5)
    assert ids(hits)[0] == "faq:add"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert all(h.searcher == searcher.name for h in hits)


def test_paraphrase_with_shared_words(searcher):
    assert ids(searcher.search("图书馆几点开放？", 3))[0] == "faq:library"


def test_top_k_larger_than_corpus(searcher, entries):
    hits = searcher.search("知识 模式 阈值 图书馆 食堂 ollama", 100)
    assert 0 < len(hits) <= len(entries)
    assert len(set(ids(hits))) == len(hits)


def test_top_k_limits(searcher):
    assert len(searcher.search("知识 模式 阈值 图书馆 食堂", 2)) <= 2


@pytest.mark.parametrize("query", ["", "   ", "？！。，", "?!..."])
def test_empty_and_punctuation_only_query(searcher, query):
    assert searcher.search(query, 5) == []


def test_unknown_words_never_beat_a_real_match(searcher):
    real = searcher.search("怎么添加知识", 1)[0].score
    unknown = searcher.search("qwxzv plokij", 5)
    assert all(h.score < real for h in unknown)


def test_chinese_english_mix(searcher):
    assert ids(searcher.search("Ollama 怎么连接", 3))[0] == "faq:ollama"


def test_add_replace_remove(searcher, entries):
    new = Entry("faq:new", "停车场收费标准", "校内停车每小时五元。", ("停车",))
    searcher.upsert([new])
    assert ids(searcher.search("停车场收费", 1)) == ["faq:new"]
    searcher.upsert([dataclasses.replace(new, document="校内停车每小时八元。")])
    hits = searcher.search("停车场收费", 3)
    assert ids(hits).count("faq:new") == 1
    assert hits[0].entry.document == "校内停车每小时八元。"
    searcher.remove(["faq:new"])
    assert "faq:new" not in ids(searcher.search("停车场收费", 5))


def test_sync_touches_only_changes(searcher, entries):
    changed = [dataclasses.replace(e, document=e.document + " 更新。") if e.id == "faq:mode" else e for e in entries]
    changed = [e for e in changed if e.id != "faq:canteen"]
    report = searcher.sync(changed)
    assert (report.added, report.updated, report.removed, report.rebuilt) == (0, 1, 1, False)
    assert "faq:canteen" not in ids(searcher.search("食堂在哪里", 5))
    assert searcher.search("切换检索模式", 1)[0].entry.document.endswith("更新。")


def test_persistence_round_trip(searcher, make, entries):
    expected = ids(searcher.search("怎么添加知识", 3))
    reopened = make()
    assert reopened.indexed_hashes() == {e.id: e.content_hash for e in entries}
    report = reopened.sync(entries)
    assert not report.changed
    assert ids(reopened.search("怎么添加知识", 3)) == expected
