"""The operator's week on the command line: log stats' stable outcome keys and topics, edits replayed with
--dry-run (JSON, nothing written, exit 1 on lost answers), drafts added and published."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from bot.config.settings import load_settings
from bot.factory import build_knowledge_base
from tests.support.cli import run
from tests.support.knowledge import config_dict

pytestmark = pytest.mark.e2e


@pytest.fixture
def config(tmp_path, kb_dir) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config_dict(tmp_path, kb_dir), allow_unicode=True), encoding="utf-8")
    kb = build_knowledge_base(load_settings(path))
    for question in ("图书馆开放时间", "食堂在哪里？", "宿舍几点熄灯？"):
        kb.ask(question, source="web", session=question)
    assert kb.recorder.log is not None
    kb.recorder.log.close()
    return path


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def test_log_stats_carries_the_outcome_keys_and_topics(config):
    done = run(config, "log", "stats", "--json")
    assert done.returncode == 0, done.stderr
    tiles = json.loads(done.stdout)
    for key in ("resolution_rate", "handoff_rate", "answered_rate", "solved_yes_rate"):
        assert tiles[key]["total"][0] == "total", key
    assert tiles["answered_rate"]["total"][1:3] == [3, 2]  # 宿舍 has no entry
    assert tiles["topics"]["rows"] == [] and "Too few questions" in tiles["topics"]["note"]
    text = run(config, "log", "stats")
    assert "Resolution rate" in text.stdout and "total" in text.stdout


def test_dry_runs_replay_real_questions_and_write_nothing(config, kb_dir):
    before = snapshot(kb_dir)
    lost = run(config, "knowledge", "delete", "faq.json:library", "--dry-run", "--json")
    assert lost.returncode == 1, lost.stderr
    doc = json.loads(lost.stdout)
    assert doc["replayed"] == 3 and doc["gained"] == [] and doc["changed"] == []
    assert [(c["question"], c["before"]["id"], c["after"]) for c in doc["lost"]] == [
        ("图书馆开放时间", "faq:library", None)
    ]
    gained = run(
        config, "knowledge", "add", "--file", "faq", "--query", "宿舍几点熄灯？", "--document", "十一点。", "--dry-run"
    )
    assert gained.returncode == 0 and "[gained] 宿舍几点熄灯？" in gained.stdout and "nothing written" in gained.stdout
    upload = kb_dir.parent / "more.json"
    upload.write_text(
        json.dumps({"dorm": {"query": "宿舍几点熄灯？", "document": "十一点。"}}, ensure_ascii=False), "utf-8"
    )
    imported = run(config, "knowledge", "import", str(upload), "--dry-run", "--json")
    assert imported.returncode == 0, imported.stderr
    doc = json.loads(imported.stdout)
    assert [c["after"]["id"] for c in doc["gained"]] == ["more:dorm"] and doc["duplicates"] == []
    assert snapshot(kb_dir) == before


def test_a_draft_is_added_then_published(config, kb_dir):
    added = run(
        config,
        "knowledge",
        "add",
        "--file",
        "faq",
        "--key",
        "dorm",
        "--query",
        "宿舍几点熄灯？",
        "--document",
        "十一点。",
        "--draft",
    )
    assert added.returncode == 0, added.stderr
    assert json.loads((kb_dir / "faq.json").read_text(encoding="utf-8"))["dorm"]["draft"] is True
    asked = run(config, "ask", "宿舍几点熄灯？", "--json")
    assert json.loads(asked.stdout)["decision"] != "answer"
    published = run(config, "knowledge", "publish", "faq.json:dorm")
    assert published.returncode == 0 and "Published faq:dorm" in published.stdout
    assert json.loads(run(config, "ask", "宿舍几点熄灯？", "--json").stdout)["decision"] == "answer"
    bad = run(config, "knowledge", "edit", "--file", "faq", "--key", "dorm", "--valid-until", "31.12.2026")
    assert bad.returncode == 2 and "ISO date" in bad.stderr


def test_a_restore_is_replayed_first_and_an_unknown_version_refused(config, kb_dir):
    deleted = run(config, "knowledge", "delete", "faq.json:library")
    assert deleted.returncode == 0, deleted.stderr
    history = run(config, "knowledge", "history", "faq.json")
    version = history.stdout.splitlines()[1].split("\t")[0]  # the newest kept version: before the deletion
    after_delete = snapshot(kb_dir)
    back = run(config, "knowledge", "restore", "faq.json", version, "--dry-run", "--json")
    assert back.returncode == 0, back.stderr  # nothing lost: only gains
    doc = json.loads(back.stdout)
    assert [(c["question"], c["before"], c["after"]["id"]) for c in doc["gained"]] == [
        ("图书馆开放时间", None, "faq:library")
    ]
    assert snapshot(kb_dir) == after_delete
    unknown = run(config, "knowledge", "restore", "faq.json", "20990101T000000-zzzz", "--dry-run")
    assert unknown.returncode == 2 and "no kept version" in unknown.stderr
