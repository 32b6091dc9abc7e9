"""Knowledge as CSV (Excel-friendly): export every entry, import rows through the store, a template to start from.

Columns: ``file`` (knowledge file, e.g. faq.json; empty = the import's default file), ``key`` (entry key; empty =
the next number), ``query``, ``document``, ``metadata`` (comma-separated keywords) and ``questions`` (other
phrasings of the question, separated by ``|`` or line breaks) and ``categories`` (comma-separated: what a search
can be restricted to, bot/knowledge/filters.py), then ``draft`` (true: saved but not answering yet), ``valid_from``
and ``valid_until`` (ISO dates: bot/knowledge/validity.py). Rows are numbered like a spreadsheet: the header
is row 1. Files are written UTF-8 with a BOM so Excel shows Chinese; a BOM on import is accepted.

Imports also take the headers people's FAQ sheets have, in either language (HEADER_ALIASES: question/问题/标准问题
→ query, answer/答案 → document, keywords/关键词 → metadata, 相似问题 → questions; a 分类/category column gives the
entry's categories and stays one more keyword, as it was before categories existed), and Excel ``.xlsx`` files (the first sheet; row numbers in errors as Excel shows them).
"""

from __future__ import annotations

import csv
import io
import json
import re
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.errors import KnowledgeError, KnowledgeProblem
from bot.knowledge.entries import Entry, parse_keywords
from bot.knowledge.entry_ids import entry_id, key_of
from bot.knowledge.files import entry_file
from bot.knowledge.store import KnowledgeStore
from bot.knowledge.validity import field_problems

COLUMNS = (
    "file",
    "key",
    "query",
    "document",
    "metadata",
    "questions",
    "categories",
    "draft",
    "valid_from",
    "valid_until",
)
DRAFT_WORDS = {
    "true": True,
    "yes": True,
    "1": True,
    "是": True,
    "草稿": True,
    "false": False,
    "no": False,
    "0": False,
    "否": False,
}
CATEGORY = "categories"  # the entry's categories; its value also joins the row's keywords
# Header names as people write them (compared case-folded, spaces and underscores ignored) -> our column.
HEADER_ALIASES = {
    **{name: "query" for name in ("question", "title", "问题", "标准问题", "标题", "问")},
    **{name: "document" for name in ("answer", "content", "reply", "答案", "回答", "答复", "内容", "标准答案")},
    **{name: "metadata" for name in ("keywords", "keyword", "tags", "tag", "关键词", "关键字", "标签")},
    **{name: "questions" for name in ("phrasings", "similarquestions", "相似问题", "相似问法", "其他问法", "问法")},
    **{name: CATEGORY for name in ("category", "categories", "分类", "类别", "类目")},
    **{name: "file" for name in ("文件",)},
    **{name: "key" for name in ("id", "键", "编号")},
}
REQUIRED = ("query", "document")
CSV_ENCODING = "utf-8-sig"  # what exports and the template are written in (Excel needs the BOM for Chinese)
_PHRASING_SPLIT = re.compile(r"[|\r\n]+")
TEMPLATE_ROWS = (
    (
        "faq.json",
        "",
        "图书馆几点开门？",
        "图书馆每天早上八点开门，晚上十点关门。",
        "图书馆,开放时间",
        "图书馆开放时间 | 图书馆什么时候开",
        "校园设施",
        "",
        "",
        "",
    ),
    (
        "faq.json",
        "parking",
        "How much is parking?",
        "Parking on campus costs 5 yuan an hour.",
        "parking,fees",
        "",
        "",
        "",
        "",
        "",
    ),
)


@dataclass
class CsvFile:
    """The rows bound for one knowledge file: keyed ones (replace or join) and unkeyed ones (get new numbers)."""

    keyed: dict[str, dict] = field(default_factory=dict)
    unkeyed: list[dict] = field(default_factory=list)


# A cell starting with one of these is a formula to Excel, LibreOffice and Sheets (OWASP "CSV injection"); knowledge
# text can come from chat users through the inbox, so exports quote them with a leading ' (and imports drop it).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def neutralise(cell: str) -> str:
    """``cell`` as a spreadsheet shows it as text: a leading ' before a formula character."""
    return f"'{cell}" if cell.startswith(FORMULA_START) else cell


def restore(cell: str) -> str:
    """The text a cell written by :func:`neutralise` stood for (cells without the quote unchanged)."""
    return cell[1:] if cell.startswith("'") and cell[1:].startswith(FORMULA_START) else cell


def _write(rows: Iterable[Iterable[str]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(COLUMNS)
    writer.writerows([neutralise(cell) for cell in row] for row in rows)
    return out.getvalue()


def template_csv() -> str:
    """A CSV with the header and two example rows, to fill in and import."""
    return _write(TEMPLATE_ROWS)


def export_csv(entries: Iterable[Entry], folder: Path | str | None = None) -> str:
    """Every entry as one CSV row (file relative to ``folder``, key, fields; phrasings joined by " | ")."""
    return _write(
        (
            entry_file(e, folder),
            key_of(e.id),
            e.query,
            e.document,
            e.keywords,
            " | ".join(getattr(e, "questions", ()) or ()),
            ",".join(e.categories),
            "true" if e.draft else "",
            e.valid_from or "",
            e.valid_until or "",
        )
        for e in entries
    )


def json_name(file: str) -> str:
    """A file name as typed in a CSV, with ``.json`` added when missing."""
    file = file.strip()
    return file if not file or file.endswith(".json") else f"{file}.json"


def column(name: str) -> str:
    """Our column for a header cell as written ("Question", "标准问题" -> "query"); unknown names as they are."""
    folded = re.sub(r"[\s_\-]+", "", name.strip().lstrip("\ufeff").casefold())
    return folded if folded in COLUMNS else HEADER_ALIASES.get(folded, name.strip().casefold())


def read_csv(text: str, default_file: str, source: str = "CSV") -> dict[str, CsvFile]:
    """Validate every row of a knowledge CSV and group the entries by file; raises KnowledgeError naming rows.

    ``source`` names the upload in messages; rows without a file go to ``default_file``.
    """
    text = text.removeprefix("\ufeff")
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as exc:
        raise KnowledgeError([KnowledgeProblem(source, None, f"不是有效的 CSV / not valid CSV: {exc}")]) from None
    return read_rows(list(enumerate(rows, start=1)), default_file, source)


# What one .xlsx import may read: far beyond a FAQ sheet, far below what exhausts memory. A sheet's own size claim
# (<dimension>) is never trusted: openpyxl would pad every row to it (A1:XFD1048576 in 1.5 KB is 17 billion cells).
MAX_XLSX_ROWS = 20_000  # rows with content
EXCEL_ROWS = 1_048_576  # Excel's last row
MAX_XLSX_COLUMNS = 50
MAX_XLSX_CELLS = 200_000  # non-empty cells
MAX_XLSX_CHARS = 20_000_000  # characters in all cells
MAX_XLSX_UNPACKED_BYTES = 100 * 1024 * 1024  # the workbook's files once unzipped


def read_xlsx(data: bytes, default_file: str, source: str = "Excel") -> dict[str, CsvFile]:
    """As :func:`read_csv`, for the first sheet of an Excel .xlsx file (rows numbered as Excel shows them)."""
    from openpyxl import load_workbook

    def refuse(why: str) -> KnowledgeError:
        return KnowledgeError([KnowledgeProblem(source, None, why)])

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            unpacked = sum(info.file_size for info in archive.infolist())
        if unpacked > MAX_XLSX_UNPACKED_BYTES:
            raise refuse(
                f"工作簿解压后超过 {MAX_XLSX_UNPACKED_BYTES // 2**20} MB / the workbook unpacks to "
                f"{unpacked // 2**20} MB, over the cap of {MAX_XLSX_UNPACKED_BYTES // 2**20} MB"
            )
        book = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
        try:
            sheet = book.worksheets[0]
            sheet.reset_dimensions()
            rows = list(_sheet_rows(sheet, refuse))
        finally:
            book.close()
    except KnowledgeError:
        raise
    except MemoryError:
        raise refuse(
            "工作簿太大，无法读入内存 / the workbook is too large to read into memory; split it into smaller files"
        ) from None
    except Exception as exc:  # openpyxl raises many kinds (zip, XML, key errors) for a file that is not a workbook
        raise refuse(
            f"不是有效的 Excel .xlsx 文件 / not a valid Excel .xlsx file: {type(exc).__name__}: {exc}"
        ) from None
    while rows and not any(c.strip() for c in rows[0][1]):
        rows.pop(0)  # rows of spaces above the header
    return read_rows(rows, default_file, source)


def _sheet_rows(sheet: Any, refuse: Callable[[str], KnowledgeError]) -> Iterator[tuple[int, list[str]]]:
    """(row number, cells up to the last filled one) of each non-blank row of a read-only sheet; a KnowledgeError
    naming the cap when it has more rows, columns, cells or characters than one import reads."""
    kept = cells = chars = 0
    # One column past the cap is read, to tell a sheet that has it from one that ends there.
    rows = sheet.iter_rows(min_row=1, max_col=MAX_XLSX_COLUMNS + 1, values_only=True)
    for number, values in enumerate(rows, start=1):
        # openpyxl makes up the blank rows between two row numbers: a number past Excel's last row is a bomb
        if number > EXCEL_ROWS:
            raise refuse(f"行号超过 Excel 的上限 / a row number past Excel's last row ({EXCEL_ROWS})")
        if values.count(None) == len(values):
            continue
        row = [_cell(v) for v in values]
        while row and not row[-1]:
            row.pop()
        if not row:
            continue
        kept += 1
        cells += sum(1 for c in row if c)
        chars += sum(len(c) for c in row)
        if kept > MAX_XLSX_ROWS:
            raise refuse(f"表格超过 {MAX_XLSX_ROWS} 行 / the sheet has more than {MAX_XLSX_ROWS} rows; split it")
        if len(row) > MAX_XLSX_COLUMNS:
            raise refuse(
                f"第 {number} 行超过 {MAX_XLSX_COLUMNS} 列 / row {number} has more than {MAX_XLSX_COLUMNS} columns"
            )
        if cells > MAX_XLSX_CELLS:
            raise refuse(f"表格超过 {MAX_XLSX_CELLS} 个单元格 / the sheet has more than {MAX_XLSX_CELLS} filled cells")
        if chars > MAX_XLSX_CHARS:
            raise refuse(
                f"表格超过 {MAX_XLSX_CHARS} 个字符 / the sheet's cells hold more than {MAX_XLSX_CHARS} characters"
            )
        yield number, row


def _cell(value: object) -> str:
    """An Excel cell as text: empty for None, 12 (not 12.0) for a whole number."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def read_rows(rows: list[tuple[int, list[str]]], default_file: str, source: str) -> dict[str, CsvFile]:
    """Validate (row number, cells) rows, the first being the header, and group the entries by file."""
    problems: list[KnowledgeProblem] = []
    files: dict[str, CsvFile] = {}

    def bad(row: int | None, why: str) -> None:
        where = source if row is None else f"{source} 第 {row} 行 / row {row}"
        problems.append(KnowledgeProblem(where, None, why))

    expected = f"expected {', '.join(COLUMNS)} (or question/问题, answer/答案, keywords/关键词, 相似问题, 分类)"
    top = rows[0][0] if rows else 1
    header = [column(h) for h in rows[0][1]] if rows else []
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        bad(top, f"表头缺少列 / the header lacks column(s) {', '.join(missing)}; {expected}")
        raise KnowledgeError(problems)
    unknown = [h for h in header if h and h not in (*COLUMNS, CATEGORY)]
    if unknown:
        bad(top, f"未知的列 / unknown column(s) {', '.join(unknown)}; {expected}")
    doubled = sorted({h for h in header if h and header.count(h) > 1})
    if doubled:
        bad(top, f"多列对应同一个字段 / several columns mean {', '.join(doubled)}; keep one of each")
        raise KnowledgeError(problems)
    seen: dict[tuple[str, str], int] = {}
    for number, cells in rows[1:]:
        if not any(c.strip() for c in cells):
            continue  # blank lines (Excel leaves some at the end)
        if len(cells) > len(header):
            bad(
                number,
                f"有 {len(cells)} 个单元格，表头只有 {len(header)} 列 / {len(cells)} cells but {len(header)} columns",
            )
            continue
        row = {name: (restore(cells[i]) if i < len(cells) else "") for i, name in enumerate(header)}
        for name in REQUIRED:
            if not row[name].strip():
                bad(number, f"缺少 {name} / missing {name!r}")
        file = json_name(row.get("file", "")) or default_file
        if not file.endswith(".json") or file.startswith(".") or any(c in file for c in "/\\\0"):
            bad(
                number,
                f"文件名无效 / bad file name {file!r}: a plain name like faq.json (no folders; import files "
                "in subfolders as JSON)",
            )
        key = row.get("key", "").strip()
        if key and (file, key) in seen:
            bad(number, f"与第 {seen[file, key]} 行重复 / same file and key as row {seen[file, key]}: {file} {key!r}")
        seen[file, key] = number
        categories = parse_keywords(row.get(CATEGORY, ""))
        keywords = parse_keywords(row.get("metadata", "")) + categories
        raw: dict = {
            "query": row["query"].strip(),
            "document": row["document"].strip(),
            "metadata": ",".join(dict.fromkeys(keywords)),
        }
        phrasings = [p.strip() for p in _PHRASING_SPLIT.split(row.get("questions", "")) if p.strip()]
        if phrasings:
            raw["questions"] = phrasings
        if categories:
            raw["categories"] = list(categories)
        for why in _publication(row, raw):
            bad(number, why)
        target = files.setdefault(file, CsvFile())
        if key:
            target.keyed[key] = raw
        else:
            target.unkeyed.append(raw)
    if not seen and not problems:
        bad(None, "没有数据行 / no data rows under the header")
    if problems:
        raise KnowledgeError(problems)
    return files


def _publication(row: dict[str, str], raw: dict) -> list[str]:
    """Set a row's draft flag and validity dates on its entry; what is wrong with them."""
    draft = row.get("draft", "").strip().casefold()
    problems = (
        []
        if not draft or draft in DRAFT_WORDS
        else [f"draft 应为 true 或 false / draft must be true or false, not {draft!r}"]
    )
    if DRAFT_WORDS.get(draft):
        raw["draft"] = True
    for name in ("valid_from", "valid_until"):
        if row.get(name, "").strip():
            raw[name] = row[name].strip()
    return problems + field_problems(raw)


def import_csv(store: KnowledgeStore, text: str, default_file: str, source: str = "CSV") -> list[str]:
    """Validate a knowledge CSV, then merge its rows into their files through ``store`` (locked, history kept).

    Rows with a key replace or join that entry; rows without get the next numbers. Returns the ids written.
    """
    return import_rows(store, read_csv(text, json_name(default_file), source))


def import_xlsx(store: KnowledgeStore, data: bytes, default_file: str, source: str = "Excel") -> list[str]:
    """As :func:`import_csv`, for an Excel .xlsx file's first sheet."""
    return import_rows(store, read_xlsx(data, json_name(default_file), source))


def import_rows(store: KnowledgeStore, grouped: dict[str, CsvFile]) -> list[str]:
    """Merge validated rows into their files through ``store``; returns the ids written."""
    ids: list[str] = []
    for name, rows in grouped.items():
        stem = Path(name).stem
        if name not in store.files() and not rows.keyed:
            # A new file gets keys 1..n (object form); refused, not merged, if it appeared meanwhile.
            numbered = {str(i): raw for i, raw in enumerate(rows.unkeyed, start=1)}
            ids += store.import_file(name, json.dumps(numbered, ensure_ascii=False))
            continue
        if rows.keyed:
            store.import_file(name, json.dumps(rows.keyed, ensure_ascii=False), merge=True)
            ids += [entry_id(stem, k) for k in rows.keyed]
        if rows.unkeyed:
            before = {entry_id(stem, k) for k, _ in store.entries(name)}
            after = store.import_file(name, json.dumps(rows.unkeyed, ensure_ascii=False), merge=True)
            ids += [i for i in after if i not in before]
    return ids
