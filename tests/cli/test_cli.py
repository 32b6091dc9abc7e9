"""The CLI as a user runs it: real subprocesses, real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from tests.support.cli import run
from tests.support.knowledge import ROOT, config_dict

pytestmark = pytest.mark.e2e


@pytest.fixture
def config_file(tmp_path, kb_dir):
    raw = config_dict(tmp_path, kb_dir, sparse=0.5)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return path


def test_ask_json_names_strategy_and_hits(config_file):
    r = run(config_file, "ask", "怎么添加知识？", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["strategy"] == "direct" and out["llm_used"] is False
    assert out["thresholds"] == {
        "system": "sparse",
        "answer": 0.5,
        "direct": None,
        # what the file leaves out of the block keeps its shipped value
        "clarify": 0.01,
        "confirm": None,
        "unsure": 0.15,
        "stand_in": 0.1,
        "settle": 0.1,
        "settle_dense": None,
        "translated": None,  # sparse offers what only the dictionary found
        "contrast": False,
        "together": None,
    }
    assert out["decision"] == "answer" and out["options"] == []
    best = out["hits"][0]
    assert best["id"] == "faq:add" and best["relevance"] >= 0.5 and best["searcher"] == "tantivy"
    assert best["signals"]["coverage"] == best["relevance"] and best["score"] == best["signals"]["bm25"] > 1.0


def test_ask_off_topic_is_last_resort(config_file):
    out = json.loads(run(config_file, "ask", "火星上有几座城市", "--json").stdout)
    assert out["strategy"] == "last_resort" and out["hits"] == []


def test_search_lists_scores_without_llm(config_file):
    r = run(config_file, "search", "图书馆几点开放")
    assert r.returncode == 0
    first = r.stdout.splitlines()[0]
    assert "图书馆开放时间" in first and first.startswith("✓ 1. 0.700") and "coverage 0.7" in first and "bm25 " in first
    assert "relevance threshold sparse ≥ 0.5" in r.stdout


def test_search_json_marks_what_passes(config_file):
    out = json.loads(run(config_file, "search", "怎么添加知识", "--json").stdout)
    assert [(h["id"], h["passed"]) for h in out["hits"]] == [("faq:add", True), ("faq:mode", False)]
    assert out["hits"][1]["relevance"] < 0.5 <= out["hits"][0]["relevance"]


def test_index_reports_counts_then_no_changes(config_file):
    first = run(config_file, "index")
    assert first.returncode == 0 and "added 6" in first.stdout
    second = run(config_file, "index")
    assert "added 0, updated 0, removed 0" in second.stdout
    rebuilt = run(config_file, "index", "--rebuild")
    assert "added 6" in rebuilt.stdout and "(rebuilt)" in rebuilt.stdout


def test_index_with_malformed_file_exits_nonzero_naming_file_and_entry(config_file, kb_dir):
    (kb_dir / "broken.json").write_text(json.dumps({"e1": {"query": "", "document": "x"}}), encoding="utf-8")
    r = run(config_file, "index")
    assert r.returncode == 2
    assert "broken.json" in r.stderr and "'e1'" in r.stderr and "'query' is empty" in r.stderr


def test_unknown_config_key_is_rejected(tmp_path, config_file):
    text = config_file.read_text(encoding="utf-8").replace("top_k:", "topk: 3\n  top_k:")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text, encoding="utf-8")
    r = run(bad, "search", "x")
    assert r.returncode == 2 and "retrieval.topk" in r.stderr


@pytest.mark.parametrize("order", ["before", "after", "mixed"])
def test_global_options_go_before_or_after_the_subcommand(tmp_path, kb_dir, order):
    raw = config_dict(tmp_path, kb_dir, sparse=0.5)
    raw["retrieval"]["mode"] = "hybrid"  # --mode sparse must win, wherever it is written
    path = tmp_path / "other.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    args = {
        "before": ["--config", str(path), "--mode", "sparse", "search", "怎么添加知识？", "--json"],
        "after": ["search", "怎么添加知识？", "--json", "--mode", "sparse", "--config", str(path)],
        "mixed": ["--mode", "sparse", "search", "--config", str(path), "怎么添加知识？", "--json"],
    }[order]
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "KBBOT_MODE")}
    r = subprocess.run(
        [sys.executable, "-m", "bot", *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["mode"] == "sparse" and out["hits"][0]["id"] == "faq:add"


def test_a_mode_typo_is_an_error_that_lists_the_modes(config_file):
    r = run(config_file, "search", "怎么添加知识？", "--mode", "dnese")
    assert r.returncode == 2 and "sparse" in r.stderr and "dnese" in r.stderr and not r.stdout


def test_a_missing_knowledge_folder_is_an_error_not_an_answer_from_the_old_index(tmp_path, kb_dir, config_file):
    assert run(config_file, "index").returncode == 0  # an index now exists in the state folder
    raw = yaml.safe_load(config_file.read_text(encoding="utf-8"))
    raw["knowledge"]["path"] = str(tmp_path / "moved-away")
    config_file.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    for args in (["search", "怎么添加知识？"], ["ask", "怎么添加知识？"]):
        r = run(config_file, *args)
        assert r.returncode == 2, r.stdout
        assert "moved-away" in r.stderr and "knowledge.path" in r.stderr and "faq:add" not in r.stdout


def test_a_config_typo_is_an_error_naming_the_key(tmp_path, kb_dir):
    raw = config_dict(tmp_path, kb_dir, sparse=0.5)
    raw["retrieval"]["top_kk"] = 3
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    r = run(path, "search", "怎么添加知识？")
    assert r.returncode == 2 and "retrieval.top_kk" in r.stderr and not r.stdout


def test_index_counts_the_rules_and_warns_of_a_bad_one_with_its_line(config_file, kb_dir):
    (kb_dir / "rules.yaml").write_text(
        "- exact: 开饭啦\n  entry: faq:canteen\n- regex: '(食堂'\n  entry: faq:canteen\n", encoding="utf-8"
    )
    r = run(config_file, "index")
    assert r.returncode == 0 and "added 6" in r.stdout and " · 1 rule(s)" in r.stdout
    assert f"warning: rule left out: {kb_dir / 'rules.yaml'}:3: the regex '(食堂' does not compile" in r.stderr
    asked = json.loads(run(config_file, "ask", "开饭啦！", "--json").stdout)
    assert asked["strategy"] == "rule" and asked["rule"]["line"] == 1 and asked["hits"][0]["id"] == "faq:canteen"
