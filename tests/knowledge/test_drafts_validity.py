"""Drafts and validity dates: the fields validate and round-trip (file, index record, CSV), drafts and entries
outside their dates never answer a visitor but show in the retrieval test, and lint lists what expires soon."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime

import pytest

from bot.errors import KnowledgeError
from bot.evaluation.knowledge_check import EXPIRING, expiring_findings
from bot.factory import build_knowledge_base, build_store
from bot.knowledge.csv_io import export_csv, read_csv
from bot.knowledge.entries import entry_from_record, entry_record, load_entries, write_entries
from bot.knowledge.validity import Availability, Publication, status_of
from tests.support.knowledge import TINY, write_knowledge

pytestmark = pytest.mark.unit

DRAFT = {"query": "宿舍几点熄灯？", "document": "晚上十一点熄灯。", "metadata": "宿舍,熄灯", "draft": True}
SIGNUP = {
    "query": "报名时间是什么时候？",
    "document": "今年的报名时间是三月一日到三月三十一日。",
    "metadata": "报名",
    "valid_from": "2026-03-01",
    "valid_until": "2026-03-31",
}


def test_the_fields_load_and_round_trip_through_records_files_and_csv(tmp_path):
    write_knowledge(tmp_path / "kb", {"dorm": DRAFT, "signup": SIGNUP, **TINY})
    entries = {e.id: e for e in load_entries(tmp_path / "kb")}
    draft, signup = entries["faq:dorm"], entries["faq:signup"]
    assert draft.draft and signup.valid_from == "2026-03-01" and signup.valid_until == "2026-03-31"
    assert entry_from_record(entry_record(signup)) == signup and entry_from_record(entry_record(draft)) == draft
    assert draft.content_hash != entry_from_record({**entry_record(draft), "draft": False}).content_hash
    assert entries["faq:add"].availability == {}  # absent fields leave older entries (and their hashes) alone
    write_entries(entries.values(), tmp_path / "copy")
    assert {e.id: e for e in load_entries(tmp_path / "copy")} == entries
    rows = read_csv(export_csv(entries.values(), tmp_path / "kb"), "faq.json")["faq.json"].keyed
    assert rows["dorm"]["draft"] is True and rows["signup"]["valid_until"] == "2026-03-31"
    assert "draft" not in rows["add"] and "valid_from" not in rows["add"]


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"draft": "yes"}, "'draft' must be true or false"),
        ({"valid_from": "2026/03/01"}, "'valid_from' must be an ISO date"),
        ({"valid_until": "2026-02-30"}, "'valid_until' must be an ISO date"),
        ({"valid_from": "2026-04-01", "valid_until": "2026-03-01"}, "is after 'valid_until'"),
    ],
)
def test_bad_fields_are_refused_naming_the_entry(tmp_path, fields, problem):
    write_knowledge(tmp_path / "kb", {"x": {"query": "q", "document": "d", **fields}})
    with pytest.raises(KnowledgeError) as err:
        load_entries(tmp_path / "kb")
    assert problem in str(err.value) and "x" in str(err.value)


def test_a_bad_csv_cell_names_its_row(tmp_path):
    text = "query,document,draft,valid_until\nq,d,maybe,\nq2,d2,,31.03.2026\n"
    with pytest.raises(KnowledgeError) as err:
        read_csv(text, "faq.json")
    assert "row 2" in str(err.value) and "maybe" in str(err.value)
    assert "row 3" in str(err.value) and "'valid_until' must be an ISO date" in str(err.value)


def test_the_store_sets_keeps_and_clears_the_fields(settings):
    store = build_store(settings)
    key = store.upsert_entry(
        "faq.json", None, "新问题", "新答案", "", publication=Publication(True, None, "2030-01-01")
    )
    raw = dict(store.entries("faq.json"))[key.split(":")[1]]
    assert raw["draft"] is True and raw["valid_until"] == "2030-01-01" and "valid_from" not in raw
    store.upsert_entry("faq.json", key.split(":")[1], "新问题", "改过的答案", "")  # no publication: kept
    raw = dict(store.entries("faq.json"))[key.split(":")[1]]
    assert raw["draft"] is True and raw["document"] == "改过的答案"
    store.upsert_entry("faq.json", key.split(":")[1], "新问题", "改过的答案", "", publication=Publication())
    raw = dict(store.entries("faq.json"))[key.split(":")[1]]
    assert not {"draft", "valid_from", "valid_until"} & set(raw)


def test_drafts_and_expired_entries_answer_nobody_but_show_in_the_retrieval_test(settings, kb_dir):
    expired = {**SIGNUP, "valid_from": "2020-03-01", "valid_until": "2020-03-31"}
    write_knowledge(kb_dir, {"dorm": DRAFT, "signup": expired, **TINY})
    kb = build_knowledge_base(settings)
    for question in ("宿舍几点熄灯？", "报名时间是什么时候？"):
        answer = kb.ask(question)
        assert answer.decision.value != "answer" or all(
            h.entry.id not in ("faq:dorm", "faq:signup") for h in answer.hits
        )
    shown = kb.bot.retrieve_all_modes("宿舍几点熄灯？")["sparse"]
    assert shown.hits[0].entry.id == "faq:dorm" and shown.hits[0].entry.draft
    assert kb.ask("食堂在哪里？").hits[0].entry.id == "faq:canteen"  # published entries answer as before


def test_an_entry_answers_only_within_its_days_in_the_knowledge_time_zone():
    entry = entry_from_record({"id": "faq:signup", **SIGNUP, "metadata": ["报名"]})
    shanghai = Availability("Asia/Shanghai", clock=lambda: datetime(2026, 3, 31, 16, 30, tzinfo=UTC))
    assert not shanghai.answers(entry)  # 16:30 UTC on 31 March is already 1 April in Shanghai
    london = Availability("Europe/London", clock=lambda: datetime(2026, 3, 31, 16, 30, tzinfo=UTC))
    assert london.answers(entry)
    assert status_of(entry, date(2026, 2, 28)) == "not yet" and status_of(entry, date(2026, 4, 1)) == "expired"


def test_lint_lists_entries_that_expire_within_the_window(tmp_path):
    write_knowledge(tmp_path / "kb", {"signup": SIGNUP, "later": {**SIGNUP, "valid_until": "2026-06-01"}, **TINY})
    entries = load_entries(tmp_path / "kb")
    found = expiring_findings(entries, date(2026, 3, 20), 14)
    assert [(f.kind, f.entry_ids) for f in found] == [(EXPIRING, ("faq:signup",))]
    assert "2026-03-31" in found[0].detail
    assert expiring_findings(entries, date(2026, 4, 2), 14) == []  # already expired: it answers nobody anyway
    draft = {"signup": {**SIGNUP, "draft": True}}
    write_knowledge(tmp_path / "drafts", draft)
    assert expiring_findings(load_entries(tmp_path / "drafts"), date(2026, 3, 20), 14) == []


def test_a_file_keeps_the_fields_as_written(settings, kb_dir):
    store = build_store(settings)
    store.upsert_entry(
        "faq.json",
        "signup",
        SIGNUP["query"],
        SIGNUP["document"],
        "",
        publication=Publication(False, "2026-03-01", " 2026-03-31 "),
    )
    saved = json.loads((kb_dir / "faq.json").read_text(encoding="utf-8"))["signup"]
    assert saved["valid_from"] == "2026-03-01" and saved["valid_until"] == "2026-03-31" and "draft" not in saved
