"""The entry browser's server-side paging and search, layout-keeping saves, and CSV import/export."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from bot.editing.entry_table import entry_page, safe_hit_counts
from bot.errors import KnowledgeError
from bot.knowledge.csv_io import export_csv, import_csv, read_csv, template_csv
from bot.knowledge.entries import Entry, load_entries
from bot.knowledge.store import ABSENT, KnowledgeStore, StaleEditError
from tests.support.knowledge import TINY, write_knowledge

pytestmark = pytest.mark.e2e


def synthetic(n: int) -> list[Entry]:
    return [
        Entry(
            f"big:{i}",
            f"Question number {i}",
            f"第 {i} 条答案。" + ("中山大学校训是博学审问慎思明辨笃行" if i == 12345 else ""),
            (f"kw{i}", "通用"),
            questions=(f"Phrasing {i}",),
        )
        for i in range(n)
    ]


def test_entry_page_at_20k_entries_returns_one_page_quickly():
    entries = synthetic(20_000)
    start = time.perf_counter()
    page = entry_page(entries, "", 3, 50)
    everything = time.perf_counter() - start
    assert len(page.rows) == 50 and page.total == 20_000 and page.pages == 400 and page.rows[0].id == "big:100"
    start = time.perf_counter()
    found = entry_page(entries, "校训", 1, 50)
    searched = time.perf_counter() - start
    assert [r.id for r in found.rows] == ["big:12345"] and found.total == 1 and found.pages == 1
    assert everything < 2 and searched < 2, (everything, searched)  # loose: tens of ms on a laptop
    # Case-insensitive over every field, phrasings included; all words must match; pages clamp.
    assert entry_page(entries, "PHRASING 19999").rows[0].id == "big:19999"
    assert entry_page(entries, "question 7 kw7", 1).total == 1111  # substrings: 7, 70-79, 700-799, 7000-7999
    assert entry_page(entries, "", 10_000, 50).page == 400 and entry_page(entries, "nothing-like-this").rows == []


def unreadable_log() -> dict[str, tuple[int, str]]:
    """A hit-count provider whose log cannot be read."""
    raise sqlite3.OperationalError("unable to open database file")


def test_entry_page_hits_and_missing_log():
    entries = synthetic(3)
    row = entry_page(entries, "", hits={"big:1": (4, "2024-05-01T10:00:00Z")}).rows
    assert (row[1].hits, row[1].last_hit) == (4, "2024-05-01T10:00:00Z") and (row[0].hits, row[0].last_hit) == (0, None)
    assert entry_page(entries, "").rows[0].hits is None
    assert safe_hit_counts(None) is None and safe_hit_counts(unreadable_log) is None


def test_the_table_shows_the_last_hit_to_the_minute():
    from bot.ui.entry_browser import HEADERS, table_rows

    page = entry_page(synthetic(2), "", hits={"big:1": (4, "2026-11-27T09:05:33.123456+00:00")})
    cells = dict(zip(HEADERS, table_rows(page)[1], strict=True))
    assert cells["最近命中 last hit (UTC)"] == "2026-11-27 09:05" and cells["命中 hits"] == "4"
    assert dict(zip(HEADERS, table_rows(page)[0], strict=True))["最近命中 last hit (UTC)"] == "—"


def test_a_save_keeps_the_files_layout_and_key_order(tmp_path):
    kb = tmp_path / "kb"
    kb.mkdir()
    text = (
        '{\n    "b":{\n        "query":"问题乙",\n        "document":"内容乙",\n        "metadata":"乙"\n    },\n'
        '    "a":{\n        "query":"问题甲",\n        "document":"内容甲",\n        "metadata":"甲"\n    }\n}'
    )
    (kb / "x.json").write_text(text, encoding="utf-8")
    store = KnowledgeStore(kb, tmp_path / "state" / "locks")
    store.upsert_entry("x.json", "a", "问题甲", "新内容甲", "甲", expected_version=store.version("x.json", "a"))
    after = (kb / "x.json").read_text(encoding="utf-8")
    assert after == text.replace("内容甲", "新内容甲")  # same indent, same "key":value, same order, no final newline
    store.upsert_entry("x.json", None, "问题丙", "内容丙", "", expected_version=ABSENT)
    assert list(json.loads((kb / "x.json").read_text(encoding="utf-8"))) == ["b", "a", "1"]
    with pytest.raises(StaleEditError, match="该条目已存在"):
        store.upsert_entry("x.json", "b", "q", "d", "", expected_version=ABSENT)


def test_csv_round_trip(tmp_path):
    src = tmp_path / "src"
    write_knowledge(src, TINY)
    write_knowledge(
        src,
        {
            "p": {
                "query": "停车",
                "document": "每小时五元，\n周末免费",
                "metadata": "停车,收费",
                "questions": ["停车多少钱", "车停哪里|收费"],
            }
        },
        "more.json",
    )
    entries = load_entries(src)
    text = export_csv(entries, src)
    dst = tmp_path / "dst"
    dst.mkdir()
    store = KnowledgeStore(dst, tmp_path / "state" / "locks")
    ids = import_csv(store, text, "imported.json")
    assert sorted(ids) == sorted(e.id for e in entries)
    again = {e.id: e for e in load_entries(dst)}
    for e in entries:
        got = again[e.id]
        assert (got.query, got.document, got.metadata) == (e.query, e.document, e.metadata)
    # "|" separates phrasings in a CSV: a phrasing holding "|" comes back as two.
    assert again["more:p"].questions == ("停车多少钱", "车停哪里", "收费")
    assert (
        export_csv(load_entries(dst), dst).splitlines()[0]
        == "file,key,query,document,metadata,questions,categories,draft,valid_from,valid_until"
    )


def test_csv_errors_name_the_row_and_bom_is_accepted(tmp_path):
    text = "query,document,metadata\r\n问题一,答案一,a\r\n问题二,,b\r\n,答案三,c\r\n"
    with pytest.raises(KnowledgeError) as caught:
        read_csv(text, "faq.json", "up.csv")
    problems = [str(p) for p in caught.value.problems]
    assert len(problems) == 2 and "row 3" in problems[0] and "'document'" in problems[0]
    assert "row 4" in problems[1] and "'query'" in problems[1]
    kb = tmp_path / "kb"
    write_knowledge(kb, TINY)
    store = KnowledgeStore(kb, tmp_path / "state" / "locks")
    bom = "\ufeffquery,document,questions\n新问题,新答案,问法一\n问法二\n"  # Excel: BOM, unquoted → 2 rows
    with pytest.raises(KnowledgeError, match="row 3"):
        import_csv(store, bom, "faq.json")
    ids = import_csv(store, '\ufeffquery,document,questions\n新问题,新答案,"问法一\n问法二"\n', "faq.json")
    assert ids == ["faq:1"]
    saved = json.loads((kb / "faq.json").read_text(encoding="utf-8"))
    assert list(saved)[: len(TINY)] == list(TINY) and saved["1"]["questions"] == ["问法一", "问法二"]
    assert len(read_csv(template_csv(), "faq.json")["faq.json"].unkeyed) == 1


def test_cli_exports_and_imports_csv(tmp_path, kb_dir):
    import yaml

    from tests.support.cli import knowledge as cli
    from tests.support.knowledge import config_dict

    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(config_dict(tmp_path, kb_dir), allow_unicode=True), encoding="utf-8")
    out = tmp_path / "out.csv"
    r = cli(config, "export", "--csv", str(out))
    assert r.returncode == 0 and f"Exported {len(TINY)} entries" in r.stdout, r.stderr
    assert out.read_bytes().startswith(b"\xef\xbb\xbf") and "怎么添加知识？" in out.read_text(encoding="utf-8-sig")
    edited = out.read_text(encoding="utf-8-sig").replace("学生食堂位于校园东区", "学生食堂搬到西区")
    edited += "faq.json,,新问题,新答案,新,\r\n"
    out.write_text(edited, encoding="utf-8-sig")
    r = cli(config, "import", str(out))
    assert r.returncode == 0 and f"Imported {out}: {len(TINY) + 1} entries" in r.stdout, r.stderr
    saved = json.loads((kb_dir / "faq.json").read_text(encoding="utf-8"))
    assert saved["canteen"]["document"].startswith("学生食堂搬到西区") and saved["1"]["query"] == "新问题"
    assert list(saved) == [*TINY, "1"]


def test_knowledge_tab_csv_upload_export_and_table(app_client, kb_dir, tmp_path):
    from gradio_client import handle_file

    client, bot = app_client
    rows, info, page = client.predict("食堂", api_name="/entry_table")
    assert page == 1 and "1 entries" in info and rows["data"][0][:3] == ["faq.json", "canteen", "食堂在哪里？"]
    rows, info, page = client.predict("no-such-text", api_name="/entry_table")
    assert rows["data"] in ([], [["" for _ in rows["headers"]]]) and "0 entries" in info
    bad = tmp_path / "campus.csv"
    bad.write_text("query,document\n体育馆几点关门？,体育馆晚上九点关门。\n游泳馆呢？,\n", encoding="utf-8-sig")
    status, _ = client.predict(handle_file(str(bad)), False, api_name="/upload_file")
    assert "row 3" in status and "Not saved" in status and not (kb_dir / "campus.json").exists()
    good = tmp_path / "campus2.csv"
    good.write_text("query,document\n体育馆几点关门？,体育馆晚上九点关门。\n", encoding="gb18030")  # Chinese Excel
    status, _ = client.predict(handle_file(str(good)), False, api_name="/upload_file")
    assert "Imported campus2.csv: 1 entries" in status, status
    assert bot.retrieve("体育馆几点关门")[1][0].entry.id == "campus2:1"
    exported = client.predict(api_name="/export_csv")
    text = Path(exported).read_text(encoding="utf-8-sig")
    assert "campus2.json,1,体育馆几点关门？" in text and "faq.json,canteen," in text
