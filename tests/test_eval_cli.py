"""``eval`` and ``calibrate`` on tiny generated fixtures, plus the line-based YAML editor behind ``--write``."""

from __future__ import annotations

import difflib
import json
import os
import shutil
import subprocess
import sys

import pytest

from bot.calibration import best_threshold, split_questions
from bot.cli import main
from bot.evaluation import EvalQuestion, exact_match, f1_score, load_questions
from bot.knowledge import load_entries
from bot.text import Tokenizer
from bot.yaml_edit import YamlEditError, set_scalar
from tests.conftest import ROOT, write_knowledge

KB = {
    "library": ("图书馆开放时间", "图书馆每天早上八点到晚上十点开放。", "图书馆,开放时间"),
    "canteen": ("食堂在哪里", "学生食堂位于校园东区。", "食堂,餐饮"),
    "parking": ("停车场收费标准", "停车每小时五元。", "停车场,收费"),
    "wifi": ("无线网络密码", "无线网络密码是 campus2024。", "无线网络,密码"),
    "gym": ("体育馆预约方式", "在小程序预约体育馆场地。", "体育馆,预约"),
    "dorm": ("宿舍熄灯时间", "宿舍晚上十一点熄灯。", "宿舍,熄灯"),
    "bus": ("校车路线", "校车从南门出发经过北区。", "校车,路线"),
    "printing": ("打印复印服务", "打印店在教学楼一楼。", "打印,复印"),
    "hospital": ("校医院挂号", "校医院周末也可以挂号。", "校医院,挂号"),
    "card": ("校园卡充值", "校园卡可以在支付宝充值。", "校园卡,充值"),
    "exam": ("考试成绩查询", "登录教务系统查询考试成绩。", "成绩,考试"),
    "ollama": ("How do I connect Ollama?", "Set llm.base_url to the Ollama endpoint.", "ollama,llm"),
}
ANSWERS = {"library": ["八点到十点", "早上八点到晚上十点"], "canteen": ["校园东区"], "parking": ["每小时五元"],
           "wifi": ["campus2024"]}


def eval_questions() -> list[dict]:
    """8 hits at rank 1 (bare and full gold ids), 2 misses (gold unrelated to the question), 2 off-topic."""
    rows = []
    for n, key in enumerate(["library", "canteen", "parking", "wifi", "gym", "dorm", "bus", "printing"]):
        row = {"question": KB[key][0], "gold_ids": [key if n % 2 else f"faq:{key}"]}
        if key in ANSWERS:
            row["answers" if len(ANSWERS[key]) > 1 else "answer"] = ANSWERS[key] if len(ANSWERS[key]) > 1 else ANSWERS[key][0]
        rows.append(row)
    rows += [{"question": "校医院挂号", "gold_ids": ["exam"]}, {"question": "校园卡充值", "gold_ids": ["ollama"]},
             {"question": "qwxzv plokij", "gold_ids": []}, {"question": "图书馆开放时间是几点", "gold_ids": []}]
    return rows


def write_jsonl(path, rows) -> str:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return str(path)


@pytest.fixture
def kb(tmp_path):
    return write_knowledge(tmp_path / "kb", {k: {"query": q, "document": d, "metadata": m} for k, (q, d, m) in KB.items()}).parent


@pytest.fixture(scope="session")
def jieba_cache(tmp_path_factory):
    """One built jieba dictionary cache, copied into each test's state (building it takes seconds)."""
    folder = tmp_path_factory.mktemp("jieba")
    Tokenizer(cache_dir=folder).tokenize("预热")
    return folder


@pytest.fixture
def config(tmp_path, kb, monkeypatch, jieba_cache):
    """The repository's config.yaml, comments and all, pointed at the tiny knowledge with small fastText settings."""
    shutil.copytree(jieba_cache, tmp_path / "state" / "jieba")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("KBBOT_MODE", raising=False)
    text = (ROOT / "config.yaml").read_text(encoding="utf-8")
    for keys, value in [(("knowledge", "path"), str(kb)), (("state_dir",), str(tmp_path / "state")),
                        (("retrieval", "sparse", "threshold"), 1.0), (("retrieval", "dense", "threshold"), 0.5),
                        (("retrieval", "dense", "embed_template"), "{query} {metadata}"),
                        (("retrieval", "dense", "fasttext", "dim"), 32), (("retrieval", "dense", "fasttext", "epoch"), 50),
                        (("retrieval", "dense", "fasttext", "bucket"), 20000)]:
        text = set_scalar(text, keys, value)
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def questions(tmp_path):
    return write_jsonl(tmp_path / "q.jsonl", eval_questions())


def run_cli(*args):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "KBBOT_MODE")}
    return subprocess.run([sys.executable, "-m", "bot", *args], check=False, capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)


def run_json(capsys, *args) -> dict:
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


# -- eval ----------------------------------------------------------------------------------
def test_gold_ids_bare_and_full_resolve_to_entry_ids(kb, questions):
    qs = load_questions(questions, load_entries(kb))
    assert qs[0].gold == {"faq:library"} and qs[1].gold == {"faq:canteen"} and qs[-1].gold == frozenset()
    assert qs[0].answers == ("八点到十点", "早上八点到晚上十点") and qs[1].answers == ("校园东区",)


def test_eval_json_numbers_match_the_hand_count(config, questions, capsys):
    doc = run_json(capsys, "--config", str(config), "eval", "--questions", questions)
    (r,) = doc["modes"]
    assert (r["mode"], r["answerable"], r["off_topic"]) == ("sparse", 10, 2)
    # 8 of 10 answerable questions have their gold first; the 2 with unrelated gold never find it.
    assert r["recall"] == {"1": 0.8, "3": 0.8, "5": 0.8} and r["mrr"] == pytest.approx(0.8)
    assert r["pass_rate"] == 1.0 and r["thresholds"] == {"tantivy": 1.0}
    # Gibberish finds nothing; "图书馆开放时间是几点" wrongly passes on the library entry.
    assert r["off_topic_pass_rate"] == 0.5 and r["p95_ms"] >= r["p50_ms"] > 0


def test_eval_table_via_subprocess(config, questions):
    r = run_cli("--config", str(config), "eval", "--questions", questions, "--no-split")
    assert r.returncode == 0, r.stderr
    row = next(line for line in r.stdout.splitlines() if line.startswith("| sparse"))
    assert "| 10 + 2 off-topic | 0.800 | 0.800 | 0.800 | 0.800 | 1.000 | 0.500 |" in row
    assert "splitting off" in r.stdout


def test_eval_other_knowledge_file_uses_a_derived_state(config, tmp_path, capsys):
    (tmp_path / "other.json").write_text(json.dumps([{"query": v[0], "document": v[1]} for v in KB.values()],
                                                    ensure_ascii=False), encoding="utf-8")
    qs = write_jsonl(tmp_path / "o.jsonl", [{"question": "校车路线", "gold_ids": [6]}, {"question": "宿舍熄灯时间", "gold_ids": ["other:5"]}])
    doc = run_json(capsys, "--config", str(config), "eval", "--questions", qs, "--knowledge", str(tmp_path / "other.json"))
    assert doc["modes"][0]["recall"]["1"] == 1.0 and doc["entries"] == 12
    assert "/eval/" in doc["state_dir"] and not (tmp_path / "state" / "tantivy").exists()


@pytest.mark.slow
def test_eval_modes_side_by_side(config, questions, capsys):
    doc = run_json(capsys, "--config", str(config), "eval", "--questions", questions, "--modes", "sparse,dense")
    sparse, dense = doc["modes"]
    assert (sparse["mode"], dense["mode"]) == ("sparse", "dense") and dense["answerable"] == 10
    assert dense["thresholds"] == {"faiss": 0.5} and 0.5 <= dense["recall"]["5"] <= 0.8


@pytest.mark.slow
def test_answers_em_f1_against_the_local_llm(config, questions, llm_server, monkeypatch, capsys):
    replies = {"图书馆开放时间": "八点到十点", "食堂在哪里": "在校园东区。", "停车场收费标准": "每小时五元", "无线网络密码": "不知道"}
    llm_server.reply = lambda body: replies.get(body["messages"][-1]["content"].rsplit("Question: ", 1)[-1], "不知道")
    text = set_scalar(config.read_text(encoding="utf-8"), ("llm", "base_url"), llm_server.url)
    config.write_text(set_scalar(text, ("llm", "max_retries"), 0), encoding="utf-8")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    (r,) = run_json(capsys, "--config", str(config), "eval", "--questions", questions, "--answers")["modes"]
    # EM 1, 0, 1, 0; F1 1, 8/9 ("在校园东区" holds the 4-token answer in 5 tokens), 1, 0.
    assert r["scored_answers"] == 4 and r["exact_match"] == 0.5
    assert r["f1"] == pytest.approx((1 + 8 / 9 + 1 + 0) / 4)


def test_answers_without_an_llm_key_exits_2(config, questions):
    r = run_cli("--config", str(config), "eval", "--questions", questions, "--answers")
    assert r.returncode == 2 and "--answers" in r.stderr and "OPENAI_API_KEY" in r.stderr and "大模型" in r.stderr


def test_cmrc_style_answer_scores():
    assert exact_match("八点，到十点！", ["八点到十点"]) == 1.0 and exact_match("Hello  World", ["hello world."]) == 1.0
    assert f1_score("八点", ["八点到十点"]) == pytest.approx(2 * 1 * 0.4 / 1.4)
    assert f1_score("不知道", ["八点"]) == 0.0 and f1_score("八点", ["不对", "八点"]) == 1.0


# -- calibrate -------------------------------------------------------------------------------
def calibration_questions(tmp_path) -> str:
    rows = [{"question": q, "gold_ids": [k]} for k, (q, _, _) in KB.items()] + [{"question": "qwxzv plokij", "gold_ids": []}]
    return write_jsonl(tmp_path / "c.jsonl", rows)


def test_best_threshold_separates_and_prefers_the_stricter_tie():
    assert best_threshold([10.0, 12.0, 15.0], [1.0, 3.0, float("-inf")]) == 6.5
    assert best_threshold([0.9, 0.8], [0.85]) == 0.8  # everything positive beats cutting at 0.875
    assert best_threshold([0.9, 0.3], [0.6, 0.5]) == 0.75  # F1 2/3 either way: the stricter one


def test_split_is_seeded_and_labels_by_what_was_removed():
    qs = [EvalQuestion(f"q{i}", frozenset({f"k:{i}"})) for i in range(10)] + [EvalQuestion("shared", frozenset({"k:0", "k:1"}))]
    qs.append(EvalQuestion("off", frozenset()))
    a, b = split_questions(qs, 0), split_questions(qs, 0)
    assert a == b and split_questions(qs, 1).removed != a.removed
    assert len(a.removed) >= 5 and a.off_topic == 1
    assert len(a.answerable) + len(a.unanswerable) + a.dropped == len(qs)
    assert all(not (q.gold & a.removed) for q in a.answerable)


def test_calibrate_separates_a_constructed_case_deterministically(config, tmp_path, capsys):
    qs = calibration_questions(tmp_path)
    first = run_json(capsys, "--config", str(config), "calibrate", "--questions", qs, "--seed", "3")
    again = run_json(capsys, "--config", str(config), "calibrate", "--questions", qs, "--seed", "3")
    (r,) = first["results"]
    assert r["searcher"] == "tantivy" and (r["precision"], r["recall"], r["f1"]) == (1.0, 1.0, 1.0)
    assert r["answerable"] == 6 and r["unanswerable"] == 7 and first == again
    assert any(p["f1"] < 1.0 for p in r["neighbours"])


@pytest.mark.slow
def test_calibrate_hybrid_explains_and_reports_sparse_and_dense(config, tmp_path, capsys):
    args = ["--config", str(config), "calibrate", "--questions", calibration_questions(tmp_path), "--modes", "hybrid"]
    assert main([*args, "--json"]) == 0
    out = capsys.readouterr()
    assert [r["searcher"] for r in json.loads(out.out)["results"]] == ["tantivy", "faiss"]
    assert "hybrid has no threshold of its own" in out.err and "hybrid 没有自己的阈值" in out.err


def test_calibrate_write_changes_exactly_the_threshold_line(config, tmp_path):
    before = config.read_text(encoding="utf-8")
    r = run_cli("--config", str(config), "calibrate", "--questions", calibration_questions(tmp_path), "--write")
    assert r.returncode == 0, r.stderr
    assert "threshold" in r.stdout and "retrieval.sparse.threshold" in r.stderr
    after = config.read_text(encoding="utf-8")
    changed = [d for d in difflib.ndiff(before.splitlines(), after.splitlines()) if d[:1] in "+-"]
    assert len(changed) == 2 and changed[0] == "-     threshold: 1.0" and changed[1].startswith("+     threshold: ")
    assert float(changed[1].split(":")[1]) > 1.0 and "threshold: 0.5" in after  # dense was not calibrated
    assert [line for line in before.splitlines() if line.lstrip().startswith("#")] == \
           [line for line in after.splitlines() if line.lstrip().startswith("#")]


# -- yaml_edit -------------------------------------------------------------------------------
DOC = """# top comment
a:
  # about b
  b: 1.5   # trailing
  text: |-
    b: not a key
  items:
    - b: 7
      c: 8
c:
  b: x
#  b: commented
"""


def test_set_scalar_changes_only_the_value():
    out = set_scalar(DOC, ("a", "b"), 2.25)
    assert out == DOC.replace("b: 1.5   # trailing", "b: 2.25   # trailing")
    assert set_scalar(DOC, ("c", "b"), "a b: c") == DOC.replace("  b: x", '  b: "a b: c"')
    assert set_scalar(DOC.replace("\n", "\r\n"), ("a", "b"), 3.0).count("\r\n") == DOC.count("\n")


@pytest.mark.parametrize("path", [("b",), ("a", "x"), ("a", "items", "b"), ("a", "text", "b")])
def test_set_scalar_refuses_missing_keys(path):
    with pytest.raises(YamlEditError, match="0 times"):
        set_scalar(DOC, path, 1)


def test_set_scalar_refuses_duplicates_and_non_scalars():
    with pytest.raises(YamlEditError, match="2 times"):
        set_scalar(DOC + "a:\n  b: 3\n", ("a", "b"), 1)
    for path in [("a",), ("a", "text"), ("a", "items")]:
        with pytest.raises(YamlEditError, match="scalar"):
            set_scalar(DOC, path, 1)
