"""FAQ sheets as people keep them import: their headers in both languages, and Excel .xlsx files
written by openpyxl (what Excel and WPS save), through the store, the CLI in a subprocess and the editor; errors name
rows as Excel shows them and write nothing."""

from __future__ import annotations

import json

import pytest
import yaml
from openpyxl import Workbook

from bot.errors import KnowledgeError
from bot.knowledge.csv_io import import_csv, import_xlsx, read_csv
from bot.knowledge.store import KnowledgeStore
from tests.support.cli import knowledge as cli
from tests.support.knowledge import TINY, config_dict, write_knowledge

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
