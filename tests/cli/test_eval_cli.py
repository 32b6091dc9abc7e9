"""``eval`` and ``calibrate`` on tiny generated fixtures, plus the line-based YAML editor behind ``--write``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from bot.cli.main import main
from bot.config.retrieval import AgreementWeights
from bot.config.settings import load_settings
from bot.config.yaml_edit import YamlEditError, put_scalar, set_scalar
from bot.evaluation import (
    EvalQuestion,
    best_threshold,
    exact_match,
    f1_score,
    has_negatives,
    load_questions,
    make_split,
    removal_split,
)
from bot.evaluation.ladder_tuning import MAX_RAISE
from bot.knowledge.entries import load_entries
from bot.search.tantivy_searcher import TantivySearcher
from tests.support.knowledge import ROOT, write_knowledge

pytestmark = pytest.mark.e2e

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
ANSWERS = {
    "library": ["八点到十点", "早上八点到晚上十点"],
    "canteen": ["校园东区"],
    "parking": ["每小时五元"],
    "wifi": ["campus2024"],
}


def eval_questions() -> list[dict]:
    """8 hits at rank 1 (bare and full gold ids), 2 misses (gold unrelated to the question), 2 without gold."""
    rows = []
    for n, key in enumerate(["library", "canteen", "parking", "wifi", "gym", "dorm", "bus", "printing"]):
        row = {"question": KB[key][0], "gold_ids": [key if n % 2 else f"faq:{key}"]}
        if key in ANSWERS:
            row["answers" if len(ANSWERS[key]) > 1 else "answer"] = (
                ANSWERS[key] if len(ANSWERS[key]) > 1 else ANSWERS[key][0]
            )
        rows.append(row)
    rows += [
        {"question": "校医院挂号", "gold_ids": ["exam"]},
        {"question": "校园卡充值", "gold_ids": ["ollama"]},
        {"question": "qwxzv plokij", "gold_ids": []},
        {"question": "图书馆开放时间是几点", "gold_ids": []},
    ]
    return rows


def write_jsonl(path, rows) -> str:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return str(path)


@pytest.fixture
def kb(tmp_path):
    return write_knowledge(
        tmp_path / "kb", {k: {"query": q, "document": d, "metadata": m} for k, (q, d, m) in KB.items()}
    ).parent


@pytest.fixture
def config(tmp_path, kb, monkeypatch, jieba_cache):
    """The repository's config.yaml, comments and all, pointed at the tiny knowledge, with thresholds pinned here."""
    shutil.copytree(jieba_cache, tmp_path / "state" / "jieba")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("KBBOT_MODE", raising=False)
    text = (ROOT / "config.yaml").read_text(encoding="utf-8")
    for keys, value in [
        (("knowledge", "path"), str(kb)),
        (("state_dir",), str(tmp_path / "state")),
        (("retrieval", "mode"), "sparse"),
        (("retrieval", "dense", "encoder"), "e5"),
        (("retrieval", "thresholds", "sparse", "answer"), 0.5),
        (("retrieval", "thresholds", "sparse", "clarify"), None),
        (("retrieval", "thresholds", "sparse", "confirm"), None),
        (("retrieval", "thresholds", "sparse", "unsure"), None),
        (("retrieval", "thresholds", "dense-e5", "answer"), 0.87),
        (("retrieval", "thresholds", "hybrid-e5", "answer"), 0.81),
        *((("retrieval", "agreement", "sparse", name), 0.0) for name in AgreementWeights.model_fields),
    ]:
        text = put_scalar(text, keys, value)  # config.yaml leaves most keys to their defaults: added where absent
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def questions(tmp_path):
    return write_jsonl(tmp_path / "q.jsonl", eval_questions())


def run_cli(*args, cwd=ROOT):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "KBBOT_MODE")}
    return subprocess.run(
        [sys.executable, "-m", "bot", *args], check=False, capture_output=True, text=True, cwd=cwd, env=env, timeout=120
    )


def run_json(capsys, *args) -> dict:
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


# -- question files ------------------------------------------------------------------------
def test_gold_ids_bare_and_full_resolve_to_entry_ids(kb, questions):
    qs = load_questions(questions, load_entries(kb))
    assert qs[0].gold == {"faq:library"} and qs[1].gold == {"faq:canteen"} and qs[-1].gold == frozenset()
    assert qs[0].answers == ("八点到十点", "早上八点到晚上十点") and qs[1].answers == ("校园东区",)
    assert qs[0].kind == "answerable" and qs[-1].kind == "chitchat"  # no kind: by whether it has gold


def test_kinds_are_read_and_checked_against_gold(kb, tmp_path, config):
    entries = load_entries(kb)
    good = write_jsonl(
        tmp_path / "k.jsonl",
        [
            {"question": "a", "gold_ids": ["library"], "kind": "answerable"},
            {"question": "b", "gold_ids": [], "kind": "unanswerable"},
            {"question": "c", "gold_ids": [], "kind": "chitchat"},
        ],
    )
    assert [q.kind for q in load_questions(good, entries)] == ["answerable", "unanswerable", "chitchat"]
    for n, bad in enumerate(
        [
            {"question": "a", "gold_ids": ["library"], "kind": "unanswerable"},
            {"question": "b", "gold_ids": [], "kind": "answerable"},
            {"question": "c", "gold_ids": [], "kind": "offtopic"},
        ]
    ):
        path = write_jsonl(tmp_path / f"bad{n}.jsonl", [{"question": "ok", "gold_ids": []}, bad])
        with pytest.raises(ValueError, match=rf"bad{n}\.jsonl:2: .*kind {bad['kind']!r}"):
            load_questions(path, entries)
    r = run_cli("--config", str(config), "calibrate", "--questions", str(tmp_path / "bad0.jsonl"))
    assert r.returncode == 2 and "bad0.jsonl:2" in r.stderr


# -- eval ----------------------------------------------------------------------------------
def test_eval_json_numbers_match_the_hand_count(config, questions, capsys):
    doc = run_json(capsys, "--config", str(config), "eval", "--questions", questions)
    (r,) = doc["modes"]
    assert (r["mode"], r["answerable"], r["not_answerable"]) == ("sparse", 10, 2)
    # 8 of 10 answerable questions have their gold first; the 2 with unrelated gold never find it.
    assert r["recall"] == {"1": 0.8, "3": 0.8, "5": 0.8} and r["mrr"] == pytest.approx(0.8)
    assert r["pass_rate"] == 1.0
    # the fixture pins the answer threshold; the clarify margin is config.yaml's
    assert r["thresholds"] == {
        "system": "sparse",
        "answer": 0.5,
        "direct": None,
        "clarify": None,
        "confirm": None,
        "unsure": None,
        "stand_in": 0.1,
        "settle": 0.1,
        "settle_dense": None,
        "translated": None,  # sparse offers what only the dictionary found
        "contrast": False,
        "together": None,
    }
    # Gibberish finds nothing; "图书馆开放时间是几点" wrongly passes on the library entry.
    assert r["not_answerable_pass_rate"] == 0.5 and r["p95_ms"] >= r["p50_ms"] > 0


def test_eval_table_via_subprocess(config, questions):
    r = run_cli("--config", str(config), "eval", "--questions", questions, "--no-split")
    assert r.returncode == 0, r.stderr
    row = next(line for line in r.stdout.splitlines() if line.startswith("| sparse"))
    assert "| 10 + 2 not answerable | 0.800 | 0.800 | 0.800 | 0.800 | 1.000 | 0.500 |" in row
    assert "| sparse ≥ 0.5 |" in row and "splitting off" in r.stdout


def test_eval_other_knowledge_file_uses_a_derived_state(config, tmp_path, capsys):
    (tmp_path / "other.json").write_text(
        json.dumps([{"query": v[0], "document": v[1]} for v in KB.values()], ensure_ascii=False), encoding="utf-8"
    )
    qs = write_jsonl(
        tmp_path / "o.jsonl",
        [{"question": "校车路线", "gold_ids": [6]}, {"question": "宿舍熄灯时间", "gold_ids": ["other:5"]}],
    )
    doc = run_json(
        capsys, "--config", str(config), "eval", "--questions", qs, "--knowledge", str(tmp_path / "other.json")
    )
    assert doc["modes"][0]["recall"]["1"] == 1.0 and doc["entries"] == 12
    assert "/eval/" in doc["state_dir"] and not (tmp_path / "state" / "tantivy").exists()


def test_eval_modes_side_by_side(config, questions, capsys):
    doc = run_json(capsys, "--config", str(config), "eval", "--questions", questions, "--modes", "sparse,dense,hybrid")
    _, dense, hybrid = doc["modes"]
    assert [m["mode"] for m in doc["modes"]] == ["sparse", "dense", "hybrid"]
    assert [m["thresholds"] for m in doc["modes"]] == [
        {
            "system": s,
            "answer": a,
            "direct": None,
            "clarify": c,
            "confirm": None,
            "unsure": u,
            "stand_in": m,
            "settle": t,
            "settle_dense": None,
            "translated": {"sparse": None, "hybrid-e5": 0.02}.get(s, 0.0),
            "contrast": s == "hybrid-e5",
            "together": 0.5 if s == "hybrid-e5" else None,
        }
        for s, a, c, u, m, t in [
            ("sparse", 0.5, None, None, 0.1, 0.1),
            ("dense-e5", 0.87, None, None, 0.08, None),
            ("hybrid-e5", 0.81, 0.005, 0.01, 0.06, 0.3),
        ]
    ]
    for m in (dense, hybrid):
        # The 8 questions that are an entry's own query find it first in every mode; the other 2 cannot.
        assert m["answerable"] == 10 and m["recall"]["1"] == 0.8 and 0.8 <= m["recall"]["5"] <= 1.0


@pytest.mark.slow
def test_answers_em_f1_against_the_local_llm(config, questions, llm_server, monkeypatch, capsys):
    replies = {
        "图书馆开放时间": "八点到十点",
        "食堂在哪里": "在校园东区。",
        "停车场收费标准": "每小时五元",
        "无线网络密码": "不知道",
    }
    llm_server.reply = lambda body: replies.get(body["messages"][-1]["content"].rsplit("Question: ", 1)[-1], "不知道")
    text = set_scalar(config.read_text(encoding="utf-8"), ("llm", "base_url"), llm_server.url)
    config.write_text(put_scalar(text, ("llm", "max_retries"), 0), encoding="utf-8")
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
def answerable_rows() -> list[dict]:
    return [{"question": q, "gold_ids": [k]} for k, (q, _, _) in KB.items()]


NEGATIVES = [
    {"question": "学校的校训是什么", "gold_ids": [], "kind": "unanswerable"},
    {"question": "宿舍可以养猫吗", "gold_ids": [], "kind": "unanswerable"},
    {"question": "你好呀", "gold_ids": [], "kind": "chitchat"},
    {"question": "火星上有几座城市", "gold_ids": [], "kind": "chitchat"},
]


def test_best_threshold_separates_and_prefers_the_stricter_tie():
    assert best_threshold([0.7, 0.8, 0.9], [0.1, 0.3, 0.0]) == pytest.approx(0.5)  # midway between 0.3 and 0.7
    assert best_threshold([0.9, 0.8], [0.85]) == 0.8  # everything positive beats cutting at 0.875
    assert best_threshold([0.9, 0.3], [0.6, 0.5]) == 0.75  # F1 2/3 either way: the stricter one


def test_removal_split_is_seeded_and_labels_by_what_was_removed():
    qs = [EvalQuestion(f"q{i}", frozenset({f"k:{i}"})) for i in range(10)] + [
        EvalQuestion("shared", frozenset({"k:0", "k:1"}))
    ]
    a, b = removal_split(qs, 0), removal_split(qs, 0)
    assert a == b and removal_split(qs, 1).removed != a.removed
    assert len(a.removed) == 5 and "seed 0" in a.how
    assert len(a.answerable) + len(a.unanswerable) + a.dropped == len(qs)
    assert all(not (q.gold & a.removed) for q in a.answerable) and all(q.gold <= a.removed for q in a.unanswerable)
    assert not has_negatives(qs) and make_split(qs, 0) == a


def test_questions_without_gold_make_a_real_split_on_the_whole_knowledge():
    qs = [EvalQuestion(f"q{i}", frozenset({f"k:{i}"})) for i in range(4)]
    qs += [EvalQuestion("off", frozenset(), kind="unanswerable"), EvalQuestion("hi", frozenset(), kind="chitchat")]
    split = make_split(qs, 0)
    assert has_negatives(qs) and split.removed == frozenset() and make_split(qs, 7) == split
    assert [q.question for q in split.unanswerable] == ["off", "hi"] and len(split.answerable) == 4


def test_calibrate_separates_a_constructed_case_deterministically(config, kb, tmp_path, capsys, tokenizer):
    qs = write_jsonl(tmp_path / "c.jsonl", answerable_rows())
    first = run_json(capsys, "--config", str(config), "calibrate", "--questions", qs, "--seed", "3")
    again = run_json(capsys, "--config", str(config), "calibrate", "--questions", qs, "--seed", "3")
    assert first == again
    assert first["summary"] == ["gold of a random half removed (seed 3): 6 of 12 entries indexed · 6 answerable, 6 not"]
    (r,) = first["results"]
    assert r["system"] == "sparse" and (r["precision"], r["recall"], r["f1"]) == (1.0, 1.0, 1.0)
    assert r["answerable"] == 6 and r["unanswerable"] == 6
    # The threshold lies midway between the best relevance of the strongest unanswerable question and that of the
    # weakest answerable one, measured here without the CLI on an index of the entries the split kept.
    entries = load_entries(kb)
    split = make_split(load_questions(qs, entries), 3)
    kept = TantivySearcher(tmp_path / "kept", tokenizer, {"query": 3, "metadata": 2, "document": 1})
    kept.sync([e for e in entries if e.id not in split.removed])
    best = {q.question: max((h.relevance for h in kept.search(q.question, 10)), default=0.0) for q in qs_of(split)}
    lowest_yes = min(best[q.question] for q in split.answerable)
    highest_no = max(best[q.question] for q in split.unanswerable)
    assert highest_no < lowest_yes and r["threshold"] == pytest.approx((highest_no + lowest_yes) / 2, abs=5e-4)
    assert [p["threshold"] for p in r["neighbours"]] == sorted(p["threshold"] for p in r["neighbours"])
    assert r["threshold"] in [p["threshold"] for p in r["neighbours"]]


def qs_of(split):
    return [*split.answerable, *split.unanswerable]


def test_calibrate_pools_several_seeds(config, tmp_path, capsys):
    qs = write_jsonl(tmp_path / "c.jsonl", answerable_rows())
    doc = run_json(capsys, "--config", str(config), "calibrate", "--questions", qs, "--seed", "0,1,2")
    assert doc["seeds"] == [0, 1, 2] and len(doc["summary"]) == 3 and len(doc["per_seed"]) == 3
    (pooled,) = doc["results"]
    assert pooled["answerable"] == sum(run[0]["answerable"] for run in doc["per_seed"])
    assert pooled["unanswerable"] == sum(run[0]["unanswerable"] for run in doc["per_seed"])


def test_calibrate_uses_real_negatives_on_the_whole_knowledge_and_calibrates_every_mode(config, tmp_path, capsys):
    qs = write_jsonl(tmp_path / "n.jsonl", answerable_rows() + NEGATIVES)
    doc = run_json(
        capsys,
        "--config",
        str(config),
        "calibrate",
        "--questions",
        qs,
        "--seed",
        "0,1,2",
        "--modes",
        "sparse,dense,hybrid",
    )
    # Real negatives are the same for every seed: one run, nothing removed from the index.
    assert doc["seeds"] == [0] and doc["per_seed"] is None
    summary = (
        "real unanswerable and chit-chat questions, whole knowledge: 12 of 12 entries indexed · 12 answerable, 4 not"
    )
    assert doc["summary"] == [summary]
    assert [r["system"] for r in doc["results"]] == ["sparse", "dense-e5", "hybrid-e5"]
    for r in doc["results"]:
        assert (r["answerable"], r["unanswerable"]) == (12, 4) and 0.0 < r["threshold"] < 1.0 and r["f1"] > 0.8


def test_calibrate_write_changes_exactly_the_threshold_line(config, tmp_path):
    config.write_text(
        set_scalar(config.read_text(encoding="utf-8"), ("retrieval", "thresholds", "sparse", "answer"), 0.99),
        encoding="utf-8",
    )
    before = config.read_text(encoding="utf-8")
    qs = write_jsonl(tmp_path / "c.jsonl", answerable_rows())
    r = run_cli("--config", str(config), "calibrate", "--questions", qs, "--write")
    assert r.returncode == 0, r.stderr
    f1_cut = float(r.stdout.split("sparse: answer threshold ")[1].split(" ")[0])
    chosen = r.stderr.split("wrote retrieval.thresholds.sparse.answer = ")[1].split(" ")[0]
    assert f1_cut <= float(chosen) <= f1_cut + MAX_RAISE / 100 + 1e-9  # the ladder may raise the best-F1 cut
    after = config.read_text(encoding="utf-8")
    changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines()) if a != b]
    assert len(before.splitlines()) == len(after.splitlines())
    assert changed[0] == ("      answer: 0.99", f"      answer: {chosen}") and float(chosen) < 0.99
    # the rest: only sparse's clarify margin, confirm band and unsure band, the lines below its direct
    assert all(a.startswith(("      clarify: ", "      confirm: ", "      unsure: ")) for a, _ in changed[1:])
    assert len(changed) <= 4
    assert "answer: 0.87" in after and "answer: 0.81" in after  # dense and hybrid were not calibrated
    assert [line for line in before.splitlines() if line.lstrip().startswith("#")] == [
        line for line in after.splitlines() if line.lstrip().startswith("#")
    ]


def test_calibrate_write_with_unanswerable_questions_changes_only_the_ladder_numbers(tmp_path, jieba_cache):
    """A verbatim copy of config.yaml (its knowledge and state folders are relative to it, so nothing is edited)."""
    original = (ROOT / "config.yaml").read_bytes()
    config = tmp_path / "config.yaml"
    config.write_bytes(original)
    write_knowledge(
        tmp_path / "knowledge", {k: {"query": q, "document": d, "metadata": m} for k, (q, d, m) in KB.items()}
    )
    shutil.copytree(jieba_cache, tmp_path / ".state" / "jieba")
    qs = write_jsonl(tmp_path / "n.jsonl", answerable_rows() + NEGATIVES)
    r = run_cli(
        "--config",
        str(config),
        "calibrate",
        "--questions",
        qs,
        "--modes",
        "sparse,dense,hybrid",
        "--write",
        "--json",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    results = {res["system"]: res for res in json.loads(r.stdout)["results"]}
    assert set(results) == {"sparse", "dense-e5", "hybrid-e5"} and "real unanswerable" in r.stdout
    for system, res in results.items():
        # the ladder's answer threshold: the best-F1 one, or up to 0.06 above it (bot/evaluation/ladder_tuning.py)
        assert res["threshold"] <= res["ladder_answer"] <= res["threshold"] + 0.06 + 1e-9
        assert f"wrote retrieval.thresholds.{system}.answer = {res['ladder_answer']:g}" in r.stderr
    # config.yaml leaves the thresholds to their defaults: --write adds the chosen ones under retrieval, and every
    # line that was there stays, in order.
    before, after = original.decode().splitlines(), config.read_text(encoding="utf-8").splitlines()
    remaining = iter(after)
    assert all(line in remaining for line in before)  # a subsequence: nothing removed or reordered
    new = [line for line in after if line not in before]
    # per system: its key, answer, clarify, confirm and unsure
    assert after[after.index("retrieval:") + 1] == "  thresholds:" and len(new) == 1 + 5 * len(results), new
    written = load_settings(config).retrieval.thresholds
    for system, res in results.items():
        got = written[system]
        assert (got.answer, got.clarify, got.confirm) == (res["ladder_answer"], res["clarify"], res["confirm"])
        assert f"      answer: {res['ladder_answer']!r}" in after
    assert written["dense-fasttext"].answer == 0.61  # not calibrated: the shipped cutoffs stay


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


PARAPHRASES = [
    {"question": "图书馆几点开放", "gold_ids": ["library"]},
    {"question": "食堂在哪", "gold_ids": ["canteen"]},
    {"question": "停车怎么收费", "gold_ids": ["parking"]},
    {"question": "校园卡怎么充值", "gold_ids": ["card"]},
]


def test_calibrate_refuses_a_retune_that_makes_a_test_set_worse_and_names_it(config, tmp_path):
    # tuned on a file that calls the paraphrases unanswerable, the answer threshold climbs above them...
    misled = answerable_rows() + [{**p, "gold_ids": [], "kind": "unanswerable"} for p in PARAPHRASES]
    tuning = write_jsonl(tmp_path / "misled.jsonl", misled)
    test = write_jsonl(tmp_path / "visitors.jsonl", PARAPHRASES)
    before = config.read_text(encoding="utf-8")
    r = run_cli("--config", str(config), "calibrate", "--questions", tuning, "--test", test, "--write")
    # ... which the test set, where they are answerable, pays for: refused, named, nothing written
    assert r.returncode == 1, r.stderr
    assert f"refused (sparse): the retuned values make {test}: cost " in r.stderr
    assert "right 75.0 → 0.0" in r.stderr and "nothing written" in r.stderr
    assert config.read_text(encoding="utf-8") == before
    # tuned on honest labels, the same guard holds and the values are written, the agreement weights too
    honest = write_jsonl(tmp_path / "honest.jsonl", answerable_rows() + PARAPHRASES + NEGATIVES)
    r = run_cli("--config", str(config), "calibrate", "--questions", honest, "--test", test, "--weights", "--write")
    assert r.returncode == 0, r.stderr
    assert "sparse: no guard set gets worse" in r.stderr and "\n  agreement forward " in r.stdout
    assert "wrote retrieval.thresholds.sparse.answer" in r.stderr
    chosen = r.stdout.split("agreement ")[1].splitlines()[0]  # "conflict 0, other 0, ..."
    weights = {name: float(value) for name, value in (part.split() for part in chosen.split(", "))}
    assert load_settings(config).retrieval.agreement["sparse"] == AgreementWeights(**weights)


def test_calibrate_traffic_needs_the_conversation_log(config, tmp_path):
    import yaml

    raw = yaml.safe_load(config.read_text(encoding="utf-8"))
    raw.setdefault("log", {})["enabled"] = False
    config.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    r = run_cli("--config", str(config), "calibrate", "--traffic")
    assert r.returncode == 2 and "the conversation log is off" in r.stderr


def test_calibrate_tunes_and_judges_with_the_rungs_it_keeps_as_configured():
    from bot.chat.answer import Cutoffs
    from bot.cli.calibrate import kept_rungs
    from bot.evaluation.ladder_tuning import Rungs

    cutoffs = Cutoffs("hybrid-e5", 0.83, clarify=0.005, settle=0.3, contrast=True, together=0.5, translated=None)
    assert kept_rungs(cutoffs) == Rungs(settle=0.3, contrast=True, together=0.5, translated=None)
