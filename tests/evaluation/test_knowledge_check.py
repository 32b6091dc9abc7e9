"""The knowledge linter on a knowledge base with seeded defects, on the starter knowledge, and through the CLI."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import yaml

from bot.chat.recorder import row_of
from bot.config.settings import LintSettings
from bot.config.variants import replace
from bot.evaluation.knowledge_check import (
    EMPTY_DOCUMENT,
    IMPORT_DUPLICATE,
    MAGNET,
    NEAR_DUPLICATE,
    ONE_WORD_DOCUMENT,
    SELF_RETRIEVAL,
    STOP_WORD_PHRASING,
    bigrams,
    import_duplicates,
    lint,
    similar_pairs,
)
from bot.knowledge.entries import Entry
from tests.support.cli import run
from tests.support.knowledge import ROOT, config_dict, write_knowledge

pytestmark = pytest.mark.e2e

CLEAN = {
    "library": {
        "query": "图书馆几点开门？",
        "document": "图书馆每天早上八点开门，晚上十点关门。",
        "metadata": "图书馆,开放时间",
    },
    "canteen": {"query": "食堂在哪里？", "document": "学生食堂位于校园东区，靠近体育馆。", "metadata": "食堂,餐饮"},
    "parking": {
        "query": "How much is parking?",
        "document": "Parking on campus costs 5 yuan an hour.",
        "metadata": "parking",
    },
    "wifi": {
        "query": "校园网怎么连接？",
        "document": "用学号登录 SYSU-SECURE 无线网络，密码为统一认证密码。",
        "metadata": "校园网,无线",
    },
    "card": {
        "query": "校园卡丢了怎么办？",
        "document": "在服务大厅挂失并补办新卡，工本费二十元。",
        "metadata": "校园卡,补办",
    },
}
# Each seeded defect, and the finding (kind, entry ids) it must produce.
SEEDED_A = {
    **CLEAN,
    # A stored question that retrieves another entry first: "card_fee" says 校园卡 and 补办 more often.
    "card_lost": {"query": "补办校园卡", "document": "请联系辅导员。", "metadata": ""},
    "card_fee": {
        "query": "补办校园卡要多少钱？",
        "document": "补办校园卡收工本费二十元，补办校园卡当场可取。",
        "metadata": "补办校园卡,校园卡,补办",
    },
    "pharmacy": {"query": "药学", "document": "药学", "metadata": ""},  # magnet and one-word document
    "blank": {"query": "宿舍空调怎么报修？", "document": "……", "metadata": ""},  # no words at all
    "vague": {"query": "这是什么？", "document": "这是学生手册的电子版，可在教务网站下载。", "metadata": "学生手册"},
}
SEEDED_B = {  # the same entry in another file, one character apart
    "dorm": {
        "query": "宿舍几点熄灯？",
        "document": "宿舍每天晚上十一点熄灯，周末延后到十二点熄灯。",
        "metadata": "宿舍,熄灯",
    },
}
SEEDED_C = {
    "dorm": {
        "query": "宿舍几点熄灯呀？",
        "document": "宿舍每天晚上十一点熄灯，周末延后到十二点熄灯。",
        "metadata": "宿舍",
    }
}
# Questions as users ask them (the log): they share only 药学 with the knowledge.
PROBES = ["药学专业就业前景如何", "药学考研难不难", "药学和临床医学选哪个", "药学课程多不多", "图书馆几点开门"]
EXPECTED = {
    (SELF_RETRIEVAL, ("a:card_lost", "a:card_fee")),
    (NEAR_DUPLICATE, ("b:dorm", "c:dorm")),
    (MAGNET, ("a:pharmacy",)),
    (ONE_WORD_DOCUMENT, ("a:pharmacy",)),
    (EMPTY_DOCUMENT, ("a:blank",)),
    (STOP_WORD_PHRASING, ("a:vague",)),
}


@pytest.fixture
def seeded(tmp_path) -> Path:
    """A knowledge folder with every kind of defect seeded once, beside clean entries."""
    folder = tmp_path / "seeded"
    write_knowledge(folder, SEEDED_A, "a.json")
    write_knowledge(folder, SEEDED_B, "b.json")
    write_knowledge(folder, SEEDED_C, "c.json")
    return folder


def _sparse_index(settings, folder: Path):
    from bot.factory import build_index

    settings = replace(settings, "knowledge.path", str(folder))
    index = build_index(settings)
    index.load()
    index.sync("sparse")
    return index


def _lint(settings, folder: Path, probes=()):
    index = _sparse_index(settings, folder)
    return lint(index.entries, index.searcher("sparse").search, index.tokenizer.tokenize, LintSettings(), probes)


def test_every_seeded_defect_is_found_and_no_clean_entry_is_flagged(settings, seeded):
    report = _lint(settings, seeded, PROBES)
    found = {(f.kind, f.entry_ids) for f in report.findings}
    assert found >= EXPECTED, EXPECTED - found
    clean = {f"a:{key}" for key in CLEAN}
    assert not [f for f in report.findings if f.entry_ids[0] in clean]
    # The two copies of dorm also take each other's question: that is all besides the seeded findings.
    assert found - EXPECTED <= {(SELF_RETRIEVAL, ("c:dorm", "b:dorm")), (SELF_RETRIEVAL, ("b:dorm", "c:dorm"))}
    assert report.probe_source == "log" and report.probes == len(PROBES)


def test_magnets_need_unrelated_wins_not_just_wins(settings, seeded):
    # Questions the one-word entry covers entirely are related: it may answer them.
    report = _lint(settings, seeded, ["药学", "药学？", "药学!", "药学。"])
    assert MAGNET not in {f.kind for f in report.findings}


def test_the_starter_knowledge_has_no_findings(settings):
    report = _lint(settings, ROOT / "knowledge")
    assert report.entries > 100 and report.probe_source == "sample"
    assert report.findings == (), [f.detail for f in report.findings]


@pytest.mark.parametrize("threshold", [0.3, 0.5, 0.85])
def test_prefix_filtered_pairs_equal_all_pairs(threshold):
    rng = random.Random(threshold)
    texts = ["宿舍几点熄灯", "宿舍几点熄灯呀", "图书馆几点开门", "add knowledge now", "add knowledge"]
    texts += ["".join(rng.choice("甲乙丙丁戊己") for _ in range(rng.randint(2, 8))) for _ in range(150)]
    sets = [bigrams(t) for t in texts]
    brute = {
        (i, j)
        for i in range(len(sets))
        for j in range(i + 1, len(sets))
        if len(sets[i] & sets[j]) / len(sets[i] | sets[j]) >= threshold
    }
    found = {(i, j) for i, j, _ in similar_pairs(sets, threshold)}
    assert found == brute and len(brute) > 3
    assert ((0, 1) in found) == (threshold <= 0.5) and ((3, 4) in found) == (threshold <= 0.5)


def test_import_duplicates_inside_the_import_and_against_the_knowledge():
    existing = [Entry("faq:1", "图书馆几点开门？", "八点。"), Entry("faq:2", "食堂在哪里？", "东区。")]
    incoming = [
        Entry("new:1", "图书馆几点开门", "早上八点。"),  # the same question as faq:1 (punctuation aside)
        Entry("new:2", "宿舍几点熄灯？", "十一点。"),
        Entry("new:3", "宿舍几点熄灯?", "十一点熄灯。"),  # the same question as new:2
        Entry("faq:2", "食堂在哪里？", "西区。"),  # same id: a replacement, not a duplicate
    ]
    found = {f.entry_ids for f in import_duplicates(incoming, existing, 0.85)}
    assert found == {("new:1", "faq:1"), ("new:3", "new:2")}
    assert all(f.kind == IMPORT_DUPLICATE for f in import_duplicates(incoming, existing, 0.85))


# -- the CLI, as a real subprocess ------------------------------------------------------------------------
def _config(tmp_path: Path, folder: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config_dict(tmp_path, folder), allow_unicode=True), encoding="utf-8")
    return path


def test_cli_lint_exits_1_with_json_findings_and_0_when_clean(tmp_path, seeded, kb_dir):
    probes = tmp_path / "probes.txt"
    probes.write_text("\n".join(PROBES), encoding="utf-8")
    r = run(_config(tmp_path, seeded), "knowledge", "lint", "--json", "--probes", str(probes))
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    found = {(f["kind"], tuple(f["entry_ids"])) for f in doc["findings"]}
    assert found >= EXPECTED and doc["mode"] == "sparse" and doc["probe_source"] == "log"
    clean = tmp_path / "clean"
    write_knowledge(clean, CLEAN, "a.json")
    r = run(_config(tmp_path, kb_dir), "knowledge", "lint", "--knowledge", str(clean))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "5 entries · mode sparse" in r.stdout and "nothing flagged" in r.stdout


def test_cli_lint_lists_the_aliases_the_knowledge_defines_and_how_to_drop_one_without_failing(tmp_path, kb_dir):
    clean = tmp_path / "clean"
    intro = "中山大学（Sun Yat-sen University），简称“中大”，位于广东省，是教育部直属的综合性全国重点大学。"
    write_knowledge(clean, {**CLEAN, "intro": {"query": "学校简介", "document": intro, "metadata": "简介"}}, "a.json")
    config = _config(tmp_path, kb_dir)
    raw = yaml.safe_load(config.read_text(encoding="utf-8"))
    raw["knowledge"]["synonyms"] = "synonyms.txt"
    config.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    (tmp_path / "synonyms.txt").write_text("!sun yat-sen university\n", encoding="utf-8")
    r = run(config, "knowledge", "lint", "--knowledge", str(clean))
    assert r.returncode == 0, r.stdout + r.stderr  # aliases are listed, not findings
    assert "a line !<alias> in synonyms.txt" in r.stdout and "nothing flagged · 2 aliases" in r.stdout
    assert "中大 = 中山大学 · a:intro (marker: " in r.stdout
    assert "sun yat-sen university = 中山大学 · a:intro (brackets: " in r.stdout and "· dropped" in r.stdout
    doc = json.loads(run(config, "knowledge", "lint", "--knowledge", str(clean), "--json").stdout)
    assert {(a["alias"], a["name"], a["dropped"]) for a in doc["aliases"]} == {
        ("中大", "中山大学", False),
        ("sun yat-sen university", "中山大学", True),
    }


def test_cli_import_dry_run_lists_duplicates_and_writes_nothing(tmp_path, kb_dir):
    config = _config(tmp_path, kb_dir)
    before = {p.name: p.read_bytes() for p in kb_dir.iterdir()}
    upload = tmp_path / "new.json"
    upload.write_text(
        json.dumps(
            {
                "1": {"query": "食堂在哪里", "document": "东区。", "metadata": ""},  # as faq:canteen asks
                "2": {"query": "宿舍几点熄灯？", "document": "十一点。", "metadata": ""},
                "3": {"query": "宿舍几点熄灯", "document": "晚上十一点。", "metadata": ""},
            },
            ensure_ascii=False,
        ),
        encoding="utf-8",
    )
    r = run(config, "knowledge", "import", str(upload), "--dry-run")
    assert r.returncode == 1, r.stderr
    assert "new:1 ↔ faq:canteen" in r.stdout and "new:3 ↔ new:2" in r.stdout and "nothing written" in r.stdout
    assert {p.name: p.read_bytes() for p in kb_dir.iterdir()} == before
    csv = tmp_path / "rows.csv"
    csv.write_text("file,key,query,document\nfaq.json,,操场几点关门？,晚上十点。\n", encoding="utf-8")
    r = run(config, "knowledge", "import", str(csv), "--dry-run")
    assert r.returncode == 0 and "0 duplicate(s)" in r.stdout, r.stdout + r.stderr
    assert {p.name: p.read_bytes() for p in kb_dir.iterdir()} == before


def test_cli_self_check_lists_collisions(tmp_path, seeded, kb_dir):
    r = run(_config(tmp_path, kb_dir), "eval", "--self-check", "--knowledge", str(seeded))
    assert r.returncode == 1, r.stderr
    assert "a:card_lost '补办校园卡' → a:card_fee" in r.stdout
    r = run(_config(tmp_path, kb_dir), "eval", "--self-check")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "6/6 phrasings retrieve their own entry first; 0 collide" in r.stdout
    r = run(_config(tmp_path, kb_dir), "eval")
    assert r.returncode == 2 and "--questions FILE is required" in r.stderr


def test_cli_lint_probes_magnets_with_the_conversation_log_of_its_own_knowledge(tmp_path, seeded, kb_dir):
    from bot.config.settings import load_settings
    from bot.conversations.turn_log import turn_log_from_settings
    from tests.support.answers import answered

    config = _config(tmp_path, seeded)
    log = turn_log_from_settings(load_settings(config))
    assert log is not None
    for question in PROBES:
        log.record(row_of(answered(question)), "s1", source="web")
    log.close()
    doc = json.loads(run(config, "knowledge", "lint", "--json").stdout)
    assert doc["probe_source"] == "log" and doc["probes"] == len(PROBES)
    assert [MAGNET, ["a:pharmacy"]] in [[f["kind"], f["entry_ids"]] for f in doc["findings"]]
    # The log belongs to the configured knowledge: other knowledge is probed with its own phrasings.
    doc = json.loads(run(config, "knowledge", "lint", "--json", "--knowledge", str(kb_dir)).stdout)
    assert doc["probe_source"] == "sample" and doc["findings"] == []


def test_a_magnets_example_is_its_least_covered_win_not_a_question_it_answers(settings, seeded):
    index = _sparse_index(settings, seeded)
    search = index.searcher("sparse").search
    probes = ["药学是什么", *PROBES]  # the first: the one-word entry nearly covers it, it is a fair answer
    covered = {q: search(q, 1)[0].relevance for q in probes[:5]}
    assert covered["药学是什么"] == max(covered.values()) < LintSettings().magnet_max_coverage
    report = lint(index.entries, search, index.tokenizer.tokenize, LintSettings(), probes)
    [magnet] = [f for f in report.findings if f.kind == MAGNET]
    least = min(covered, key=lambda q: covered[q])
    assert magnet.detail.endswith(f"e.g. {least!r}") and "药学是什么" not in magnet.detail


def test_cli_lint_reports_bad_and_shadowed_rules_with_file_and_line(tmp_path, kb_dir):
    clean = tmp_path / "clean"
    write_knowledge(clean, CLEAN, "a.json")
    rules = clean / "rules.yaml"
    rules.write_text(
        "- contains: 食堂\n  entry: a:canteen\n"  # 1
        "- exact: 食堂几点开门\n  entry: a:library\n"  # 3: never answers, the contains rule takes it
        "- regex: '(图书馆'\n  entry: a:library\n"  # 5: does not compile
        "- exact: 校车\n  entry: a:bus\n",  # 7: no such entry
        encoding="utf-8",
    )
    r = run(_config(tmp_path, kb_dir), "knowledge", "lint", "--knowledge", str(clean))
    assert r.returncode == 1, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert f"[rule_error] {rules}:5: the regex '(图书馆' does not compile: missing ) at position 4" in lines
    assert f"[rule_error] {rules}:7: the rule answers with entry 'a:bus', which the knowledge does not have" in lines
    (shadow,) = [line for line in lines if line.startswith("[rule_shadowed]")]
    assert shadow.startswith(f"[rule_shadowed] a:library ↔ a:canteen: {rules}:3: exact '食堂几点开门'")
    assert "contains '食堂' → a:canteen" in shadow and "rule_error 2, rule_shadowed 1" in lines[-1]
    rules.write_text(
        "- exact: 食堂几点开门\n  entry: a:library\n- contains: 食堂\n  entry: a:canteen\n", encoding="utf-8"
    )
    clean_run = run(_config(tmp_path, kb_dir), "knowledge", "lint", "--knowledge", str(clean))
    assert clean_run.returncode == 0 and "nothing flagged" in clean_run.stdout  # the narrower rule first: both answer


def test_cli_lint_flags_a_missing_asset_and_unsafe_markup_until_fixed(tmp_path, kb_dir):
    clean = tmp_path / "clean"
    document = "校园地图：![地图](assets/map.png) [报名表](assets/form.pdf) [点我](javascript:alert(1))"
    write_knowledge(clean, {**CLEAN, "map": {"query": "校园地图在哪里？", "document": document}}, "a.json")
    (clean / "assets").mkdir()
    (clean / "assets" / "map.png").write_bytes((ROOT / "knowledge" / "assets" / "campus-map.png").read_bytes())
    r = run(_config(tmp_path, kb_dir), "knowledge", "lint", "--knowledge", str(clean))
    assert r.returncode == 1, r.stdout + r.stderr
    flagged = [line for line in r.stdout.splitlines() if line.startswith("[markup] a:map")]
    assert len(flagged) == 2 and "missing asset: assets/form.pdf" in flagged[0]
    assert "javascript:alert(1)" in flagged[1] and "markup 2" in r.stdout.splitlines()[-1]
    fixed = document.replace(" [点我](javascript:alert(1))", "").replace("form.pdf", "map.png")
    write_knowledge(clean, {**CLEAN, "map": {"query": "校园地图在哪里？", "document": fixed}}, "a.json")
    clean_run = run(_config(tmp_path, kb_dir), "knowledge", "lint", "--knowledge", str(clean))
    assert clean_run.returncode == 0 and "nothing flagged" in clean_run.stdout, clean_run.stdout
