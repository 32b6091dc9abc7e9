"""Synonym groups: the file format and its errors, reloading without a re-index, sparse and dense questions."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
import yaml

from bot.config.variants import replace
from bot.errors import ConfigError
from bot.search.relevance import SparseSearcher, TermStats, coverage
from bot.search.synonyms import SynonymError, Synonyms, Unit, parse_synonyms
from bot.search.tokenizer import Tokenizer
from tests.support.cli import run as run_cli
from tests.support.knowledge import TINY, config_dict, write_knowledge

pytestmark = pytest.mark.e2e

CAMPUS = {
    **TINY,
    "motto": {"query": "中山大学的校训", "document": "博学、审问、慎思、明辨、笃行。", "metadata": "校训"},
    "song": {"query": "中山大学的校歌", "document": "白云山高，珠江水长。", "metadata": "校歌"},
    "refund": {
        "query": "学费退款怎么申请？",
        "document": "在财务系统提交退款申请，十个工作日内到账。",
        "metadata": "学费,退款",
    },
}
GROUPS = "中山大学, 中大, 中山大学校\n退款，退钱\n"


def _write(path: Path, text: str) -> None:
    """Write ``text`` with a modification time that surely differs from the previous one."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(before + 10**9, before + 10**9))


def test_groups_are_parsed_normalised_with_comments_and_full_width_commas():
    groups = parse_synonyms("# campus\n中山大学, 中大 ,中山大学校\n\nRefund，退款、退钱  # money\n", "syn.txt")
    assert groups.groups == (("中山大学", "中大", "中山大学校"), ("refund", "退款", "退钱"))
    assert groups.expand("中大") == ("中大", "中山大学", "中山大学校") and groups.expand("图书馆") == ("图书馆",)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("中山大学, 中大\n退款\n", "syn.txt, line 2: a group needs at least two different words"),
        ("中山大学, 中大\n\n退款,,退钱\n", "syn.txt, line 3: an empty word"),
        ("中山大学, 中大\n中大, 中山\n", "syn.txt, line 2: '中大' is already in the group on line 1"),
    ],
)
def test_a_malformed_line_is_an_error_naming_file_and_line(text, message):
    with pytest.raises(SynonymError, match=message):
        parse_synonyms(text, "syn.txt")


def test_coverage_counts_a_group_once_and_matches_any_of_its_words():
    stats = TermStats(10, {"中山大学": 9, "中大": 0, "校训": 1})
    question: list[Unit] = [(("中大",), ("中山大学",)), "校训"]
    entry = {"中山大学", "校训"}
    assert coverage(question, entry, stats) == 1.0
    # Without the group the unknown abbreviation holds most of the IDF mass and the entry covers little of it.
    assert coverage(["中大", "校训"], entry, stats) < 0.5
    # The group weighs as its most common word: knowing 中大 = 中山大学 adds little over 校训 alone.
    assert coverage(question, {"校训"}, stats) > 0.8
    # A word of several terms matches only when the entry has all of them.
    north = [(("北校区",), ("北", "校园"))]
    assert coverage(north, {"北", "校园"}, stats) == 1.0 and coverage(north, {"校园"}, stats) == 0.0


def test_reload_on_change_keeps_the_last_good_groups_on_a_bad_edit(tmp_path, caplog):
    path = tmp_path / "synonyms.txt"
    tokenizer = Tokenizer()
    missing = Synonyms(tmp_path / "absent.txt", tokenizer, check_interval=0)
    assert not missing.current()
    _write(path, GROUPS)
    synonyms = Synonyms(path, tokenizer, check_interval=0)
    assert synonyms.current().expand("退钱") == ("退钱", "退款")
    assert "中大" in tokenizer.tokenize("中大校训")  # the words joined jieba's dictionary
    _write(path, GROUPS + "图书馆, 图书室\n")
    assert synonyms.current().expand("图书室") == ("图书室", "图书馆")
    with caplog.at_level(logging.ERROR):
        _write(path, "图书馆, 图书室\n退款\n")
        assert synonyms.current().expand("图书室") == ("图书室", "图书馆")  # kept
        assert synonyms.current().expand("退钱") == ("退钱", "退款")
    assert synonyms.error and f"{path}, line 2" in synonyms.error
    assert f"{path}, line 2" in caplog.text
    _write(path, "退款, 退钱\n")
    assert synonyms.current().expand("图书室") == ("图书室",) and synonyms.error is None
    with pytest.raises(ConfigError, match="line 1"):
        _write(path, "退款\n")
        Synonyms(path, tokenizer)  # at start a bad file stops the bot, with the same message


def test_dense_questions_get_the_canonical_form(tmp_path):
    path = tmp_path / "synonyms.txt"
    _write(path, GROUPS + "北校园, 北校区\n")
    synonyms = Synonyms(path, Tokenizer())
    assert synonyms.canonical("中大校训是什么") == "中山大学校训是什么"
    assert synonyms.canonical("中大校训是什么", "append") == "中大校训是什么 中山大学"
    assert synonyms.canonical("中大北校区在哪", "append") == "中大北校区在哪 中山大学 北校园"
    assert synonyms.canonical("中山大学校训") == "中山大学校训"  # already canonical
    assert synonyms.canonical("图书馆几点开门？") == "图书馆几点开门？"  # untouched (not even normalised)
    assert synonyms.canonical("中大校训", "off") == "中大校训"


def test_a_question_s_groups_are_kept_until_the_file_or_the_words_jieba_knows_change(tmp_path):
    path = tmp_path / "synonyms.txt"
    _write(path, GROUPS)
    tokenizer = Tokenizer()
    synonyms = Synonyms(path, tokenizer, check_interval=0)
    assert synonyms.canonical("图书室几点开门") == "图书室几点开门"
    assert synonyms.canonical("图书室几点开门") == "图书室几点开门"  # asked again: the kept lookup
    _write(path, GROUPS + "图书馆, 图书室\n")
    assert synonyms.canonical("图书室几点开门") == "图书馆几点开门"  # the edited file, not the kept lookup
    _write(path, GROUPS + "北校园, 北门口\n")
    assert synonyms.found("北门口在哪") == [(("北校园", "北门口"), "北门口")]
    tokenizer.add_words(["门口在"])  # jieba now cuts 北 / 门口在 / 哪: the group's words are not whole pieces
    assert synonyms.found("北门口在哪") == []


def test_only_words_jieba_would_cut_into_characters_join_its_dictionary(tmp_path):
    path = tmp_path / "synonyms.txt"
    _write(path, GROUPS)
    tokenizer = Tokenizer()
    Synonyms(path, tokenizer)
    assert "中大" in tokenizer.tokenize("中大校训")
    # Forcing 中山大学校 whole would cut 校训 apart in the most natural question about the motto.
    assert "校训" in tokenizer.tokenize("中山大学校训是什么")


def test_sparse_search_uses_the_groups_and_follows_edits_without_a_reindex(settings, tmp_path):
    from bot.factory import build_bot

    write_knowledge(Path(settings.knowledge.path), CAMPUS)
    path = tmp_path / "synonyms.txt"
    _write(path, "退款, 退钱\n")
    settings = replace(settings, "knowledge.synonyms", str(path))
    bot = build_bot(settings, llm=None)
    searcher = bot.index.searcher("sparse")
    (leaf,) = searcher.leaves()
    assert isinstance(leaf, SparseSearcher) and leaf.synonyms is not None
    leaf.synonyms.check_interval = 0
    hits = searcher.search("学费怎么退钱", 3)
    # coverage counts a group as found when the entry has any of its words
    assert hits[0].entry.id == "faq:refund" and hits[0].signals["coverage"] == 1.0
    before = {h.entry.id: h.signals["coverage"] for h in searcher.search("中大校训", 3)}
    assert before.get("faq:motto", 0.0) < 0.6
    indexed = leaf.indexed_hashes()
    _write(path, "退款, 退钱\n中山大学, 中大, 中山大学校\n")
    after = searcher.search("中大校训", 3)
    assert after[0].entry.id == "faq:motto" and after[0].signals["coverage"] == 1.0
    assert leaf.indexed_hashes() == indexed  # nothing was re-indexed
    _write(path, "中山大学, 中大\n")
    assert searcher.search("学费怎么退钱", 3)[0].signals["coverage"] < 1.0  # the removed group no longer applies


def test_cli_search_with_the_configured_file_and_a_clear_error_for_a_bad_line(tmp_path, kb_dir):
    write_knowledge(kb_dir, CAMPUS)
    raw = config_dict(tmp_path, kb_dir)
    raw["knowledge"]["synonyms"] = "synonyms.txt"  # relative to the config file
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    (tmp_path / "synonyms.txt").write_text(GROUPS, encoding="utf-8")
    r = run_cli(config, "search", "中大校歌", "--json")
    assert r.returncode == 0, r.stderr
    assert yaml.safe_load(r.stdout)["hits"][0]["id"] == "faq:song"
    (tmp_path / "synonyms.txt").write_text("中山大学, 中大\n退款\n", encoding="utf-8")
    r = run_cli(config, "search", "中大校歌")
    assert r.returncode == 2 and f"{tmp_path / 'synonyms.txt'}, line 2" in r.stderr and not r.stdout


def test_elasticsearch_applies_the_groups_as_tantivy_does(tmp_path):
    from bot.knowledge.entries import load_entries
    from bot.search.es_searcher import ElasticsearchSearcher
    from bot.search.tantivy_searcher import TantivySearcher
    from tests.support.es_server import FIELD_WEIGHTS, client_for, index_name, shared_server

    tokenizer = Tokenizer()
    path = tmp_path / "synonyms.txt"
    _write(path, GROUPS + "北校园, 北校区\n")
    synonyms = Synonyms(path, tokenizer)
    kb = load_entries(
        write_knowledge(
            tmp_path / "kb", {**CAMPUS, "north": {"query": "北校园在哪", "document": "越秀区。", "metadata": ""}}
        ).parent
    )
    es = ElasticsearchSearcher(client_for(shared_server().url), index_name(tmp_path), tokenizer, FIELD_WEIGHTS)
    tantivy = TantivySearcher(tmp_path / "tantivy", tokenizer, FIELD_WEIGHTS)
    for searcher in (es, tantivy):
        searcher.sync(kb)
        searcher.synonyms = synonyms
    for question in ("中大校训", "学费怎么退钱", "中大北校区在哪", "图书馆几点开门"):
        ours = {h.entry.id: round(h.signals["coverage"], 9) for h in es.search(question, 10)}
        assert ours == {h.entry.id: round(h.signals["coverage"], 9) for h in tantivy.search(question, 10)}, question
    assert es.search("中大北校区在哪", 1)[0].entry.id == "faq:north"


def test_dense_searchers_are_given_the_file_and_embed_the_canonical_question(settings, tmp_path, monkeypatch):
    import numpy as np

    from bot.factory import build_tokenizer, searcher_factories
    from bot.search.base import dense_leaf
    from bot.search.faiss_searcher import FaissSearcher

    path = tmp_path / "synonyms.txt"
    _write(path, GROUPS)
    settings = replace(settings, "knowledge.synonyms", str(path))
    settings = replace(settings, "retrieval.dense.encoder", "fasttext")
    settings = replace(settings, "retrieval.dense.synonyms", "append")
    dense = dense_leaf(searcher_factories(settings, build_tokenizer(settings))["dense"]())
    assert isinstance(dense, FaissSearcher)
    assert dense.synonyms is not None and dense.synonym_mode == "append"
    asked: list[str] = []

    def embed_query(text: str):
        asked.append(text)
        return np.ones(4, dtype=np.float32)

    monkeypatch.setattr(dense.encoder, "embed_query", embed_query)  # the question as the encoder receives it
    dense.synonym_mode = "substitute"
    dense.query_vector("中大校训是什么")
    dense.query_vector("图书馆几点开门")
    assert asked == ["中山大学校训是什么", "图书馆几点开门"]
