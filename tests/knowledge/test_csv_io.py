"""FAQ sheets as people keep them import: their headers in both languages, and Excel .xlsx files
written by openpyxl (what Excel and WPS save), through the store, the CLI in a subprocess and the editor; errors name
rows as Excel shows them and write nothing."""

from __future__ import annotations

import json
import os

import pytest
import yaml
from openpyxl import Workbook

from bot.errors import KnowledgeError
from bot.knowledge.csv_io import import_csv, import_xlsx, read_csv
from bot.knowledge.store import KnowledgeStore
from tests.support.cli import knowledge as cli
from tests.support.knowledge import ROOT, TINY, config_dict, write_knowledge

pytestmark = pytest.mark.e2e


def xlsx(path, rows, blank_rows_above: int = 0):
    """An .xlsx file whose first sheet holds ``rows`` (under ``blank_rows_above`` empty rows)."""
    book = Workbook()
    sheet = book.active
    for row in rows:
        sheet.append(list(row))
    if blank_rows_above:
        sheet.insert_rows(1, blank_rows_above)
    book.save(path)
    return path


@pytest.fixture
def store(tmp_path):
    kb = tmp_path / "kb"
    write_knowledge(kb, TINY)
    return KnowledgeStore(kb, tmp_path / "state" / "locks")


def saved(store) -> dict:
    return json.loads((store.folder / "faq.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    "header",
    [
        "question,answer,keywords",
        "Question,Answer,Keywords",
        "问题,答案,关键词",
        "标准问题,答案,关键字",
        "title,content,tags",
    ],
)
def test_a_sheet_with_peoples_headers_imports(store, header):
    ids = import_csv(store, f"{header}\n停车场怎么收费？,校内停车每小时五元。,停车\n", "faq.json")
    assert ids == ["faq:1"]
    assert saved(store)["1"] == {"query": "停车场怎么收费？", "document": "校内停车每小时五元。", "metadata": "停车"}


def test_similar_questions_become_phrasings_and_the_category_a_keyword(store):
    text = "分类,标准问题,相似问题,答案\n校园,停车场怎么收费？,停车多少钱|车停哪里收费,每小时五元。\n"
    import_csv(store, text, "faq.json")
    entry = saved(store)["1"]
    assert entry["questions"] == ["停车多少钱", "车停哪里收费"] and entry["metadata"] == "校园"
    assert entry["categories"] == ["校园"]  # and what a search can be restricted to (tests/knowledge/test_filters.py)


def test_two_columns_for_one_field_are_refused(store):
    with pytest.raises(KnowledgeError, match="several columns mean query"):
        import_csv(store, "问题,标准问题,答案\n一,二,三\n", "faq.json")
    assert saved(store) == TINY


def test_an_excel_sheet_imports_with_rows_numbered_as_excel_shows_them(store, tmp_path):
    good = xlsx(
        tmp_path / "faq.xlsx",
        [
            ("问题", "答案", "关键词", "分类"),
            ("停车场怎么收费？", "每小时五元。", "停车,收费", "校园"),
            (None, None, None, None),
        ],
    )
    assert import_xlsx(store, good.read_bytes(), "faq.json", "faq.xlsx") == ["faq:1"]
    assert saved(store)["1"]["metadata"] == "停车,收费,校园"
    rows = [("question", "answer"), ("第一问", "第一答"), ("第二问", None), (12, 3.0)]
    bad = xlsx(tmp_path / "bad.xlsx", rows, blank_rows_above=2)  # the header is on Excel's row 3
    with pytest.raises(KnowledgeError) as caught:
        import_xlsx(store, bad.read_bytes(), "faq.json", "bad.xlsx")
    [problem] = caught.value.problems
    assert "bad.xlsx 第 5 行 / row 5" in str(problem) and "'document'" in str(problem)
    assert list(saved(store)) == [*TINY, "1"]  # nothing of the bad sheet was written


def test_a_file_that_is_not_a_workbook_is_a_clear_error(store):
    with pytest.raises(KnowledgeError, match="not a valid Excel .xlsx file"):
        import_xlsx(store, b"question,answer\n", "faq.json", "fake.xlsx")


BOMB_READER = """
import json, sys, time
from bot.errors import KnowledgeError
from bot.knowledge.csv_io import read_xlsx
started = time.monotonic()
try:
    out = {"rows": [r for f in read_xlsx(open(sys.argv[1], "rb").read(), "faq.json").values() for r in f.unkeyed]}
except KnowledgeError as exc:
    out = {"error": str(exc)}
out["seconds"] = time.monotonic() - started
status = open("/proc/self/status").read()  # VmHWM: this program's peak (ru_maxrss would count the forked parent)
out["peak_mb"] = int(status.split("VmHWM:")[1].split()[0]) // 1024
print(json.dumps(out, ensure_ascii=False))
"""


def test_a_sheet_claiming_every_cell_of_excel_reads_its_two_rows_in_little_memory(tmp_path):
    import resource
    import subprocess
    import sys

    from tests.support.fault_injection import spreadsheet_bomb

    bomb = tmp_path / "bomb.xlsx"
    bomb.write_bytes(spreadsheet_bomb([("question", "answer"), ("停车场怎么收费？", "五元。")]))
    assert bomb.stat().st_size < 8_000

    def one_gigabyte() -> None:  # a reader that trusts the sheet's claim stops here instead of taking the machine
        resource.setrlimit(resource.RLIMIT_AS, (2**30, 2**30))

    done = subprocess.run(
        [sys.executable, "-c", BOMB_READER, str(bomb)],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=one_gigabyte,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    out = json.loads(done.stdout)
    assert out.get("rows") == [{"query": "停车场怎么收费？", "document": "五元。", "metadata": ""}], out
    assert out["peak_mb"] < 300 and out["seconds"] < 30


def test_a_row_number_past_excels_last_row_is_refused_not_padded(store):
    from tests.support.fault_injection import spreadsheet_bomb

    bomb = spreadsheet_bomb([("question", "answer"), ("问", "答")], last_row=10**12)
    with pytest.raises(KnowledgeError, match="past Excel's last row"):
        import_xlsx(store, bomb, "faq.json", "bomb.xlsx")
    assert list(saved(store)) == list(TINY)


@pytest.mark.parametrize(
    ("cap", "value", "rows", "message"),
    [
        ("MAX_XLSX_ROWS", 3, [("question", "answer")] + [(f"问{n}", "答") for n in range(3)], "more than 3 rows"),
        ("MAX_XLSX_COLUMNS", 3, [("question", "answer"), ("问", "答", "", "x")], "row 2 has more than 3 columns"),
        ("MAX_XLSX_CELLS", 5, [("question", "answer")] + [(f"问{n}", "答") for n in range(2)], "more than 5 filled"),
        ("MAX_XLSX_CHARS", 30, [("question", "answer"), ("问" * 20, "答" * 20)], "more than 30 characters"),
        ("MAX_XLSX_UNPACKED_BYTES", 1000, [("question", "answer"), ("问", "答")], "over the cap of 0 MB"),
    ],
)
def test_a_sheet_over_a_cap_is_refused_naming_the_cap(store, tmp_path, monkeypatch, cap, value, rows, message):
    from bot.knowledge import csv_io

    monkeypatch.setattr(csv_io, cap, value)
    sheet = xlsx(tmp_path / "big.xlsx", rows)
    with pytest.raises(KnowledgeError, match=message):
        import_xlsx(store, sheet.read_bytes(), "faq.json", "big.xlsx")
    assert list(saved(store)) == list(TINY)


def test_running_out_of_memory_is_not_called_an_invalid_file(store, tmp_path, monkeypatch):
    from bot.knowledge import csv_io

    def exhausted(value: object) -> str:
        raise MemoryError

    monkeypatch.setattr(csv_io, "_cell", exhausted)
    sheet = xlsx(tmp_path / "ok.xlsx", [("question", "answer"), ("问", "答")])
    with pytest.raises(KnowledgeError, match="too large to read into memory") as caught:
        import_xlsx(store, sheet.read_bytes(), "faq.json", "ok.xlsx")
    assert "not a valid" not in str(caught.value)


def test_numbers_in_excel_cells_are_text_without_a_decimal_point(tmp_path, store):
    sheet = xlsx(tmp_path / "n.xlsx", [("question", "answer", "key"), ("几号楼？", 3.0, 7)])
    import_xlsx(store, sheet.read_bytes(), "faq.json")
    assert saved(store)["7"]["document"] == "3"


def test_the_cli_imports_an_excel_file(tmp_path, kb_dir):
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(config_dict(tmp_path, kb_dir), allow_unicode=True), encoding="utf-8")
    sheet = xlsx(tmp_path / "campus.xlsx", [("标准问题", "答案"), ("游泳馆几点开门？", "早上七点。")])
    done = cli(config, "import", str(sheet))
    assert done.returncode == 0 and "1 entries" in done.stdout, done.stderr
    assert json.loads((kb_dir / "campus.json").read_text(encoding="utf-8"))["1"]["query"] == "游泳馆几点开门？"


def test_the_old_header_still_imports_and_unknown_columns_are_named():
    assert read_csv("query,document\n问,答\n", "faq.json")["faq.json"].unkeyed[0]["query"] == "问"
    with pytest.raises(KnowledgeError, match="unknown column"):
        read_csv("问题,答案,备注\n问,答,x\n", "faq.json")


def test_the_knowledge_tab_imports_an_excel_upload(app_client, kb_dir, tmp_path):
    from gradio_client import handle_file

    client, bot = app_client
    sheet = xlsx(
        tmp_path / "gym.xlsx", [("问题", "答案", "分类"), ("体育馆几点关门？", "体育馆晚上九点关门。", "体育")]
    )
    status, _ = client.predict(handle_file(str(sheet)), False, api_name="/upload_file")
    assert "Imported gym.xlsx: 1 entries" in status, status
    assert bot.retrieve("体育馆几点关门")[1][0].entry.id == "gym:1"
