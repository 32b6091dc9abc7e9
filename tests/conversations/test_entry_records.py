"""Every entry's record from a real log: hits, resolution, thumbs with reasons, re-asks and hand-offs after it,
last edit from the kept versions, trend; sorting; CSV and Excel exports that keep text as text."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime

import pytest
from openpyxl import load_workbook

from bot.conversations.entry_records import (
    COLUMNS,
    PAGE_COLUMNS,
    EntryRecord,
    entry_records,
    failing_tile,
    page_row,
    records_csv,
    records_xlsx,
    sort_records,
)
from bot.conversations.outcomes import Judge, read_turns
from bot.conversations.tiles import StatsFilter
from bot.factory import build_knowledge_base, build_store
from bot.knowledge.edits import last_edits
from bot.texts import DOWN_REASONS

pytestmark = pytest.mark.unit


def records_of(kb, store=None):
    turns = read_turns(kb.recorder.log, StatsFilter())
    answers = Judge().answers(turns)
    edits = last_edits(store) if store is not None else None
    known = [(e.id, e.query) for e in kb.index.entries]
    return entry_records(turns, answers, known, now=datetime.now(UTC), last_edits=edits)


def test_the_record_counts_what_followed_each_answer(settings):
    kb = build_knowledge_base(settings)
    first = kb.ask("怎么添加知识？", source="web", session="a")
    kb.ask("怎么添加知识呢", source="web", session="a")  # asked again: the first answer failed
    kb.ask("食堂在哪里？", source="web", session="b")
    kb.ask("转人工", source="web", session="b")
    liked = kb.ask("食堂在哪里？", source="web", session="c")
    kb.recorder.rate(first.turn_id, DOWN_REASONS[0][1])
    kb.recorder.rate(liked.turn_id, True)
    records = {r.id: r for r in records_of(kb)}
    add, canteen, mode = records["faq:add"], records["faq:canteen"], records["faq:mode"]
    assert (add.hits, add.resolved, add.reasked, add.down, add.reasons) == (2, 1, 1, 1, {"wrong": 1})
    assert (canteen.hits, canteen.resolved, canteen.handoffs, canteen.up) == (2, 1, 1, 1)
    assert canteen.resolution_rate == 0.5 and canteen.trend == "↑ 2" and canteen.last_hit
    assert mode.hits == 0 and mode.resolution_rate is None and mode.trend == "→"
    assert [r.id for r in sort_records(records.values(), "failures")][:2] == ["faq:add", "faq:canteen"]
    assert sort_records(records.values(), "resolution_rate", ascending=True)[0].resolution_rate is None
    with pytest.raises(ValueError, match="unknown sort"):
        sort_records(records.values(), "colour")
    tile = failing_tile(list(records.values()), top=5)
    assert [row[0] for row in tile.rows] == ["faq:add", "faq:canteen"]  # entries without failures are left out
    shown = dict(zip(PAGE_COLUMNS, page_row(add), strict=True))  # the page's narrower row
    assert shown["down_reasons"] == "wrong 1" and shown["failures"] == 1 and len(shown["last_hit"]) == 16


def test_last_edit_comes_from_the_kept_versions(settings):
    store = build_store(settings)
    assert last_edits(store) == {}  # written by hand before any history: unknown
    store.upsert_entry("faq.json", "add", "怎么添加知识？", "改过的内容。", "添加知识")
    store.upsert_entry("faq.json", "new", "新条目", "内容", "")
    edits = last_edits(store)
    assert set(edits) == {"faq:add", "faq:new"} and edits["faq:add"] <= edits["faq:new"]
    kb = build_knowledge_base(settings)
    assert {r.id: r.last_edit for r in records_of(kb, store)}["faq:add"] == edits["faq:add"]


def test_exports_keep_every_column_and_text_as_text(settings):
    kb = build_knowledge_base(settings)
    records = records_of(kb)
    rows = list(csv.reader(io.StringIO(records_csv(records))))
    assert tuple(rows[0]) == COLUMNS and len(rows) == len(records) + 1
    sheet = load_workbook(io.BytesIO(records_xlsx(records))).active
    assert tuple(c.value for c in sheet[1]) == COLUMNS and sheet.max_row == len(records) + 1
    evil = EntryRecord(id="faq:x", query='=HYPERLINK("http://x")')
    assert "'=HYPERLINK" in records_csv([evil])
    cell = load_workbook(io.BytesIO(records_xlsx([evil]))).active["B2"]
    assert cell.data_type == "s" and cell.value.startswith("=HYPERLINK")  # text, not a formula
