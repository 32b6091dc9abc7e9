"""``python -m bot knowledge add|edit|delete|publish|import|export|show|history|restore``: edits through the
knowledge store.

Every write takes the folder's writer lock, is validated like the loader, keeps the previous version of the file
in the history, and refuses stale edits; errors exit 2 with the store's message. With ``--dry-run`` an edit is
applied to a scratch copy instead and the real questions of the log and the test sets are replayed against it
(bot/evaluation/replay.py): what would gain, lose or change its answer; exit 1 when some would lose or change.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

from bot.cli.knowledge_check import add_lint_arguments, run_lint
from bot.cli.suggestions import add_suggestions_arguments, run_suggestions
from bot.errors import BotError
from bot.knowledge.entry_ids import key_of
from bot.knowledge.store import (
    ABSENT,
    KnowledgeStore,
    KnowledgeWriteError,
    entry_version,
)
from bot.knowledge.validity import Publication

_TARGET = re.compile(r"(.+?\.json):(.+)")


def add_knowledge_arguments(parser: argparse.ArgumentParser, common: list[argparse.ArgumentParser]) -> None:
    """The ``knowledge`` sub-commands; ``common`` are the global-option parents (--config, --mode, -v)."""
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = sub.add_parser("add", parents=common, help="add a new entry (never overwrites one)")
    _entry_options(add, required=True)
    edit = sub.add_parser("edit", parents=common, help="edit an entry; omitted fields keep their value")
    _entry_options(edit, required=False)
    edit.add_argument("--expected-version", help="refuse when the entry is no longer this version (see show)")
    delete = sub.add_parser("delete", parents=common, help="delete one entry")
    delete.add_argument("target", metavar="FILE:KEY", help="e.g. faq.json:add (or faq:add)")
    delete.add_argument("--expected-version", help="refuse when the entry is no longer this version (see show)")
    publish = sub.add_parser("publish", parents=common, help="publish a draft entry (it answers visitors from now)")
    publish.add_argument("target", metavar="FILE:KEY", help="e.g. faq.json:add (or faq:add)")
    for p in (add, edit, delete, publish):
        _dry_run_options(p)
    imp = sub.add_parser("import", parents=common, help="import a JSON knowledge file (or merge a CSV) into the folder")
    imp.add_argument(
        "path", help="the JSON file to import, or a .csv or Excel .xlsx (columns: bot/knowledge/csv_io.py; merged)"
    )
    imp.add_argument("--name", help="file name in the knowledge folder (default: the file's own name)")
    how = imp.add_mutually_exclusive_group()
    how.add_argument("--merge", action="store_true", help="merge into an existing file (same keys are replaced)")
    how.add_argument("--overwrite", action="store_true", help="replace an existing file (the old one is kept)")
    imp.add_argument(
        "--dry-run",
        action="store_true",
        help="write nothing: list duplicates and replay the log's and test sets' questions against the import",
    )
    imp.add_argument("--json", action="store_true", help="with --dry-run: the replay (and duplicates) as JSON")
    add_lint_arguments(
        sub.add_parser("lint", parents=common, help="flag knowledge defects (exit 1 when any); --mode: searcher")
    )
    add_suggestions_arguments(
        sub.add_parser(
            "suggestions", parents=common, help="phrasings suggested by traffic: list, --accept N, --reject N"
        )
    )
    export = sub.add_parser("export", parents=common, help="write every entry to a CSV file (Excel-friendly)")
    export.add_argument("--csv", required=True, metavar="OUT.csv", help="the CSV file to write")
    show = sub.add_parser("show", parents=common, help="list a file's entries with their versions, or show one")
    show.add_argument("file")
    show.add_argument("key", nargs="?")
    history = sub.add_parser("history", parents=common, help="list the kept earlier versions of a file")
    history.add_argument("file")
    restore = sub.add_parser("restore", parents=common, help="bring back a kept version (the current one is kept)")
    restore.add_argument("file")
    restore.add_argument("version", help="a version id as `history` lists it")
    _dry_run_options(restore)


def _entry_options(p: argparse.ArgumentParser, required: bool) -> None:
    p.add_argument("--file", required=True, help="knowledge file, relative to the folder (.json may be omitted)")
    p.add_argument("--key", required=not required, help="entry key (add: default the next number)")
    p.add_argument("--query", required=required, help="title or typical question")
    p.add_argument("--document", required=required, help="the answer text")
    p.add_argument("--metadata", default="" if required else None, help="comma-separated keywords")
    p.add_argument(
        "--questions",
        action="append",
        metavar="Q1|Q2",
        help="other phrasings of the question, separated by | (or the option repeated); edit: replaces them",
    )
    state = p.add_mutually_exclusive_group()
    state.add_argument("--draft", action="store_true", default=None, help="save as a draft (answers nobody yet)")
    state.add_argument("--published", dest="draft", action="store_false", help="edit: publish it as well")
    p.add_argument("--valid-from", metavar="YYYY-MM-DD", help="answers from this day on ('' = no limit)")
    p.add_argument("--valid-until", metavar="YYYY-MM-DD", help="answers up to this day ('' = no limit)")


def _dry_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dry-run", action="store_true", help="write nothing: replay real questions against the edit and list changes"
    )
    p.add_argument("--json", action="store_true", help="with --dry-run: {replayed, gained, lost, changed} as JSON")


def _publication(args, current: dict | None = None) -> Publication | None:
    """The --draft / --published / --valid-from / --valid-until given (None: none given, the entry keeps its own)."""
    given = [getattr(args, n, None) for n in ("draft", "valid_from", "valid_until")]
    if all(v is None for v in given):
        return None
    was = Publication.of(current)
    draft, start, end = given
    publication = Publication(
        was.draft if draft is None else draft,
        was.valid_from if start is None else start,
        was.valid_until if end is None else end,
    )
    problems = publication.problems()
    if problems:
        raise KnowledgeWriteError("; ".join(problems))
    return publication


def _phrasings(given: list[str] | None) -> list[str] | None:
    """The --questions given (split on |, blanks dropped), or None when the option was not used."""
    if given is None:
        return None
    return [q.strip() for part in given for q in part.split("|") if q.strip()]


def run_knowledge(settings, args) -> int:
    """Run one ``knowledge`` action; 0 when done, 2 (with the reason on stderr) when refused."""
    from bot.factory import build_store

    if args.action == "lint":
        return run_lint(settings, args)
    if args.action == "suggestions":
        try:
            return run_suggestions(settings, args)
        except BotError as exc:
            print(f"错误 / error: {exc}", file=sys.stderr)
            return 2
    args.near_duplicate = settings.knowledge.lint.near_duplicate  # for import --dry-run
    store = build_store(settings)
    try:
        if getattr(args, "dry_run", False) and (args.action in EDITS or args.action in ("import", "restore")):
            return _replayed(settings, store, args)
        return {
            "add": _printed(_add),
            "edit": _printed(_edit),
            "delete": _printed(_delete),
            "publish": _printed(_publish),
            "import": _import,
            "export": _export,
            "show": _show,
            "history": _history,
            "restore": _restore,
        }[args.action](store, args)
    except BotError as exc:
        print(f"错误 / error: {exc}", file=sys.stderr)
        return 2


def _replayed(settings, store: KnowledgeStore, args) -> int:
    """Apply the edit to a scratch copy, replay real questions against it, print what changes; write nothing."""
    from bot.evaluation.replay import replayer_from_settings
    from bot.factory import build_knowledge_base
    from bot.knowledge.scratch import restore_edit

    findings: list = []
    if args.action == "import":
        findings, edit = _import_plan(store, args)
    elif args.action == "restore":
        edit = restore_edit(store, _file(args.file), args.version)
    else:
        edit = lambda scratch: EDITS[args.action](scratch, args)[1]
    kb = build_knowledge_base(settings)
    replay = replayer_from_settings(kb.search, store, kb.recorder, settings).replay_edit(edit, args.mode)
    if args.json:
        out = replay.to_dict()
        if args.action == "import":
            out["duplicates"] = [{"kind": f.kind, "entries": list(f.entry_ids), "detail": f.detail} for f in findings]
        print(json.dumps(out, ensure_ascii=False, indent=2))
    else:
        for f in findings:
            print(f"[{f.kind}] {' ↔ '.join(f.entry_ids)}: {f.detail}")
        if args.action == "import":
            print(f"{args.path}: {len(findings)} duplicate(s)")
        for change in (*replay.lost, *replay.changed, *replay.gained):
            before = f"{change.before.id} {change.before.query}" if change.before else "—"
            after = f"{change.after.id} {change.after.query}" if change.after else "—"
            print(f"[{change.kind}] {change.question} ({change.source}, asked {change.asked}): {before} → {after}")
        print(f"{replay.summary()}; nothing written (--dry-run)")
    return 1 if findings or replay.needs_confirmation else 0


def _file(name: str) -> str:
    name = name.strip()
    return name if name.endswith(".json") else f"{name}.json"


def _add(store: KnowledgeStore, args) -> tuple[str, list[str]]:
    file = _file(args.file)
    entry_id = store.upsert_entry(
        file,
        args.key,
        args.query,
        args.document,
        args.metadata,
        expected_version=ABSENT,
        questions=_phrasings(args.questions),
        publication=_publication(args),
    )
    key = key_of(entry_id) if args.key is None else args.key
    return f"已添加 / Added {entry_id} to {file} (version {store.version(file, key)})", [entry_id]


def _edit(store: KnowledgeStore, args) -> tuple[str, list[str]]:
    file = _file(args.file)
    current = dict(store.entries(file)).get(args.key)
    if not isinstance(current, dict):
        raise KnowledgeWriteError(f"{file} has no entry {args.key!r}; add it with `python -m bot knowledge add`")
    # Without --expected-version the edit starts from what is on disk now: a change in between is refused.
    expected = args.expected_version or entry_version(current)
    pick = {
        name: getattr(args, name) if getattr(args, name) is not None else current.get(name, "")
        for name in ("query", "document", "metadata")
    }
    entry_id = store.upsert_entry(
        file,
        args.key,
        str(pick["query"]),
        str(pick["document"]),
        pick["metadata"] or "",
        expected_version=expected,
        questions=_phrasings(args.questions),
        publication=_publication(args, current),
    )
    return f"已保存 / Saved {entry_id} (version {expected} → {store.version(file, args.key)})", [entry_id]


def _target(text: str) -> tuple[str, str]:
    match = _TARGET.fullmatch(text)
    file, key = (match.group(1), match.group(2)) if match else (text.partition(":")[::2])
    if not file or not key:
        raise KnowledgeWriteError(f"give the entry as FILE:KEY (e.g. faq.json:add), not {text!r}")
    return _file(file), key


def _delete(store: KnowledgeStore, args) -> tuple[str, list[str]]:
    file, key = _target(args.target)
    store.delete_entry(file, key, expected_version=args.expected_version)
    done = (
        f"已删除 / Deleted {Path(file).stem}:{key} from {file} (the previous file is kept: "
        f"python -m bot knowledge history {file})"
    )
    return done, [f"{Path(file).stem}:{key}"]


def _publish(store: KnowledgeStore, args) -> tuple[str, list[str]]:
    file, key = _target(args.target)
    current = dict(store.entries(file)).get(key)
    if not isinstance(current, dict):
        raise KnowledgeWriteError(f"{file} has no entry {key!r}")
    was = Publication.of(current)
    entry_id = store.upsert_entry(
        file,
        key,
        str(current.get("query", "")),
        str(current.get("document", "")),
        current.get("metadata") or "",
        expected_version=entry_version(current),
        publication=Publication(False, was.valid_from, was.valid_until),
    )
    return f"已发布 / Published {entry_id} (version {store.version(file, key)})", [entry_id]


def _printed(apply):
    def run(store: KnowledgeStore, args) -> int:
        print(apply(store, args)[0])
        return 0

    return run


EDITS: dict[str, Callable[[KnowledgeStore, argparse.Namespace], tuple[str, list[str]]]] = {
    "add": _add,
    "edit": _edit,
    "delete": _delete,
    "publish": _publish,
}


def _read(path: Path) -> tuple[str, bytes]:
    """An import's text (JSON, CSV) or bytes (.xlsx)."""
    sheet = path.suffix.lower() == ".xlsx"
    try:
        return ("" if sheet else path.read_text(encoding="utf-8")), (path.read_bytes() if sheet else b"")
    except (OSError, UnicodeDecodeError) as exc:
        raise KnowledgeWriteError(f"cannot read {path} as UTF-8 text: {exc}") from None


def _apply_import(store: KnowledgeStore, args, text: str, data: bytes) -> tuple[str, list[str]]:
    path = Path(args.path)
    if path.suffix.lower() in (".csv", ".xlsx"):
        from bot.knowledge.csv_io import import_csv, import_xlsx

        default = _file(args.name or path.stem)
        sheet = path.suffix.lower() == ".xlsx"
        ids = import_xlsx(store, data, default, path.name) if sheet else import_csv(store, text, default, path.name)
        done = (
            f"已导入 / Imported {path}: {len(ids)} entries (merged by file and key; previous files kept in the history)"
        )
        return done, ids
    name = args.name or path.name
    existed = name in store.files()
    ids = store.import_file(name, text, overwrite=args.overwrite, merge=args.merge)
    how = ("merged into" if args.merge else "overwrote") if existed else "created"
    kept = f"; the previous file is kept: python -m bot knowledge history {name}" if existed else ""
    return f"已导入 / Imported {path} → {name} ({how}): {len(ids)} entries{kept}", ids


def _import(store: KnowledgeStore, args) -> int:
    text, data = _read(Path(args.path))
    print(_apply_import(store, args, text, data)[0])
    return 0


def _import_plan(store: KnowledgeStore, args) -> tuple[list, Callable[[KnowledgeStore], list[str]]]:
    """The import's duplicates (inside it, and with the knowledge), and the import as an edit of a scratch store."""
    from bot.evaluation.knowledge_check import import_duplicates
    from bot.knowledge.imports import incoming_entries

    path = Path(args.path)
    text, data = _read(path)
    incoming, existing = incoming_entries(store, path, text, args.name, overwrite=args.overwrite, data=data)
    findings = import_duplicates(incoming, existing, args.near_duplicate)
    return findings, lambda scratch: _apply_import(scratch, args, text, data)[1]


def _export(store: KnowledgeStore, args) -> int:
    from bot.knowledge.csv_io import CSV_ENCODING, export_csv
    from bot.knowledge.entries import load_entries

    entries = load_entries(store.folder)  # raises KnowledgeError (every problem) rather than export half
    Path(args.csv).write_text(export_csv(entries, store.folder), encoding=CSV_ENCODING, newline="")
    print(f"已导出 / Exported {len(entries)} entries → {args.csv}")
    return 0


def _show(store: KnowledgeStore, args) -> int:
    file = _file(args.file)
    stored = store.entries(file)
    if args.key is None:
        for key, raw in stored:
            query = raw.get("query", "") if isinstance(raw, dict) else ""
            print(f"{key}\t{entry_version(raw)}\t{query}")
        return 0
    found = dict(stored).get(args.key)
    if found is None:
        raise KnowledgeWriteError(f"{file} has no entry {args.key!r}")
    print(f"version {entry_version(found)}")
    print(json.dumps(found, ensure_ascii=False, indent=2))
    return 0


def _history(store: KnowledgeStore, args) -> int:
    file = _file(args.file)
    versions = store.history(file)
    if not versions:
        print(f"没有历史版本 / no kept versions of {file}")
        return 0
    print("version\treplaced at (UTC)\tentries\tbytes")
    for v in versions:
        print(f"{v.version}\t{v.time}\t{'?' if v.entries is None else v.entries}\t{v.size}")
    return 0


def _restore(store: KnowledgeStore, args) -> int:
    file = _file(args.file)
    ids = store.restore(file, args.version)
    print(
        f"已恢复 / Restored {file} to version {args.version}: {len(ids)} entries "
        f"(the replaced version is kept: python -m bot knowledge history {file})"
    )
    return 0
