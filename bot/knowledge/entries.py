"""Knowledge entries: loading every *.json under a folder, with validation that lists every problem."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from bot.errors import KnowledgeError, KnowledgeProblem
from bot.knowledge.entry_ids import entry_id, key_of, stem_of
from bot.knowledge.markup import plain_text
from bot.knowledge.validity import clean_day, field_problems

_KEYWORD_SPLIT = re.compile(r"[,，、;；]")

# Where people ask: the front ends' names, as the conversation log records them; an entry's ``variants`` are keyed
# by them.
CHANNELS = ("web", "widget", "wecom", "feishu", "api")
RULES_FILE = "rules.yaml"  # the knowledge folder's exact-match rules (bot/knowledge/rules.py)


@dataclass(frozen=True)
class Entry:
    """One piece of knowledge: a title-like ``query``, its ``document``, keyword ``metadata`` and ``questions``.

    ``questions`` are other phrasings of ``query`` (optional); every searcher matches them as it matches the query.
    ``negative_questions`` are questions it must not answer (bot/chat/negatives.py). ``categories`` are the
    groups it belongs to, which a search can be restricted to (bot/knowledge/filters.py). ``variants`` are
    (channel, text) pairs: the text sent instead of ``document`` on that channel when the entry's own text is the
    reply (docs/knowledge.md "Per-channel answers"). A ``draft`` and an entry outside ``valid_from`` ..
    ``valid_until`` (ISO dates) never answer a visitor (bot/knowledge/validity.py).
    """

    id: str
    query: str
    document: str
    metadata: tuple[str, ...] = ()
    source: str = field(default="", compare=False)
    questions: tuple[str, ...] = ()
    # Questions this entry must never answer (nor close paraphrases of them); not indexed, so not in content_hash.
    negative_questions: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    variants: tuple[tuple[str, str], ...] = ()
    draft: bool = False
    valid_from: str | None = None
    valid_until: str | None = None
    # Ids of entries to offer after this one's answer (related questions, bot/chat/related.py), in order.
    related: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """What retrieval and the prompt read of ``document``: its text without image markup, URLs or raw HTML."""
        return plain_text(self.document)

    def variant(self, channel: str | None) -> str | None:
        """The text written for ``channel`` (None: the entry has no variant for it)."""
        return next((text for name, text in self.variants if name == channel), None)

    def document_for(self, channel: str | None) -> str:
        """The text this entry shows on ``channel``: its variant for it when it has one, else ``document``."""
        return self.variant(channel) or self.document

    @property
    def availability(self) -> dict[str, object]:
        """The draft flag and validity dates that are set, as the files store them."""
        values = {"draft": self.draft or None, "valid_from": self.valid_from, "valid_until": self.valid_until}
        return {k: v for k, v in values.items() if v is not None}

    @property
    def phrasings(self) -> tuple[str, ...]:
        """The query followed by its alternative questions: every text a user question may match as a question."""
        return (self.query, *self.questions)

    @property
    def keywords(self) -> str:
        """The metadata keywords as one comma-separated string, the form the files use."""
        return ",".join(self.metadata)

    @cached_property  # searches key their caches by it: computed once per (immutable) entry
    def content_hash(self) -> str:
        """A hash of everything searchable, so an index can tell a changed entry from an unchanged one."""
        fields: list[object] = [self.id, self.query, self.document, list(self.metadata)]
        if self.questions:  # absent questions leave the hash of older entries (and their indexes) as they were
            fields.append(list(self.questions))
        if self.categories:  # indexes keep the entry's record, and a filter reads its categories from the hit
            fields.append({"categories": list(self.categories)})
        if self.variants:  # not searched, but the indexes keep the record a verbatim reply is written from
            fields.append({"variants": dict(self.variants)})
        if self.availability:  # indexes keep the record, and a turn reads whether it may answer from the hit
            fields.append(self.availability)
        if self.related:  # not searched, but kept in the record like the variants
            fields.append({"related": list(self.related)})
        blob = json.dumps(fields, ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def entry_record(entry: Entry) -> dict:
    """The stored form of an entry (indexes keep it so hits can be shown without the knowledge files)."""
    record: dict[str, object] = {
        "id": entry.id,
        "query": entry.query,
        "document": entry.document,
        "metadata": list(entry.metadata),
        "source": entry.source,
    }
    if entry.questions:
        record["questions"] = list(entry.questions)
    if entry.negative_questions:
        record["negative_questions"] = list(entry.negative_questions)
    if entry.categories:
        record["categories"] = list(entry.categories)
    if entry.variants:
        record["variants"] = dict(entry.variants)
    record.update(entry.availability)
    if entry.related:
        record["related"] = list(entry.related)
    return record


def entry_from_record(record: dict) -> Entry:
    """Inverse of :func:`entry_record`."""
    return Entry(
        record["id"],
        record["query"],
        record["document"],
        tuple(record.get("metadata", ())),
        record.get("source", ""),
        tuple(record.get("questions", ())),
        tuple(record.get("negative_questions", ())),
        tuple(record.get("categories", ())),
        tuple(record.get("variants", {}).items()),
        bool(record.get("draft", False)),
        record.get("valid_from"),
        record.get("valid_until"),
        tuple(record.get("related", ())),
    )


def write_entries(entries: Iterable[Entry], folder: Path) -> None:
    """Write entries as knowledge files (one per id stem, keyed by the rest of the id) that reload with the same ids."""
    folder.mkdir(parents=True, exist_ok=True)
    files: dict[str, dict[str, dict]] = {}
    for e in entries:
        stem, key = stem_of(e.id), key_of(e.id)
        data: dict[str, object] = {"query": e.query, "document": e.document, "metadata": list(e.metadata)}
        if e.questions:
            data["questions"] = list(e.questions)
        if e.negative_questions:
            data["negative_questions"] = list(e.negative_questions)
        if e.categories:
            data["categories"] = list(e.categories)
        if e.variants:
            data["variants"] = dict(e.variants)
        data.update(e.availability)
        if e.related:
            data["related"] = list(e.related)
        files.setdefault(stem, {})[key] = data
    for stem, records in files.items():
        (folder / f"{stem}.json").write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")


def parse_keywords(value: str | list[str]) -> tuple[str, ...]:
    """Split a comma-separated keyword string (or a list of them) into clean keywords."""
    parts = value if isinstance(value, list) else _KEYWORD_SPLIT.split(value)
    out: list[str] = []
    for part in parts:
        for word in _KEYWORD_SPLIT.split(part):
            word = word.strip()
            if word and word not in out:
                out.append(word)
    return tuple(out)


def parse_questions(value: list[str] | None, query: str = "") -> tuple[str, ...]:
    """Clean alternative questions: stripped, duplicates and copies of ``query`` dropped, order kept."""
    out = dict.fromkeys(q.strip() for q in value or ())
    out.pop(query.strip(), None)
    return tuple(out)


class _JsonObject(dict):
    """A decoded JSON object that remembers keys it saw twice (json.loads keeps only the last)."""

    duplicates: list[str]


def _object_with_duplicates(pairs: list[tuple[str, Any]]) -> _JsonObject:
    obj = _JsonObject()
    obj.duplicates = []
    for key, value in pairs:
        if key in obj:
            obj.duplicates.append(key)
        obj[key] = value
    return obj


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _check_entry(file: str, key: str, raw: Any, problems: list[KnowledgeProblem]) -> dict | None:
    if not isinstance(raw, dict):
        problems.append(KnowledgeProblem(file, key, f"must be an object with query/document, got {type(raw).__name__}"))
        return None
    ok = True
    for name in getattr(raw, "duplicates", []):
        problems.append(KnowledgeProblem(file, key, f"field {name!r} appears twice"))
        ok = False
    for name in ("query", "document"):
        value = raw.get(name)
        if value is None:
            problems.append(KnowledgeProblem(file, key, f"missing {name!r}"))
            ok = False
        elif not isinstance(value, str):
            problems.append(KnowledgeProblem(file, key, f"{name!r} must be a string, got {type(value).__name__}"))
            ok = False
        elif not value.strip():
            problems.append(KnowledgeProblem(file, key, f"{name!r} is empty"))
            ok = False
    for name in ("metadata", "categories"):
        value = raw.get(name) or ""
        if not (isinstance(value, str) or (isinstance(value, list) and all(isinstance(m, str) for m in value))):
            problems.append(
                KnowledgeProblem(file, key, f"{name!r} must be a comma-separated string or a list of strings")
            )
            ok = False
    for name, what in (
        ("questions", "other phrasings of the query"),
        ("negative_questions", "questions it must not answer"),
    ):
        ok = _check_strings(file, key, name, what, raw.get(name), problems) and ok
    ok = _check_variants(file, key, raw.get("variants"), problems) and ok
    ok = _check_strings(file, key, "related", "ids of related entries", raw.get("related"), problems) and ok
    for why in field_problems(raw):
        problems.append(KnowledgeProblem(file, key, why))
        ok = False
    for name in ("query", "document", "metadata", "questions", "negative_questions", "categories"):
        value = raw.get(name)
        texts = value if isinstance(value, list) else [value]
        if any(isinstance(t, str) and _LONE_SURROGATE.search(t) for t in texts):
            # JSON can spell "\ud800", but it is no character: every later UTF-8 write (index, file save) fails.
            problems.append(
                KnowledgeProblem(
                    file,
                    key,
                    f"{name!r} contains a lone UTF-16 surrogate escape such as "
                    "\\ud800, which is not a character; remove it or fix the pair",
                )
            )
            ok = False
    return raw if ok else None


def _check_variants(file: str, key: str, value: Any, problems: list[KnowledgeProblem]) -> bool:
    """True when ``value`` is absent or maps known channels to non-empty text; else every problem is recorded."""
    if value is None:
        return True
    if not isinstance(value, dict):
        why = f"'variants' must be an object {{channel: text}}, got {type(value).__name__}"
        problems.append(KnowledgeProblem(file, key, why))
        return False
    before = len(problems)
    for channel in getattr(value, "duplicates", []):
        problems.append(KnowledgeProblem(file, key, f"'variants' lists the channel {channel!r} twice"))
    for channel, text in value.items():
        if channel not in CHANNELS:
            why = f"'variants' names an unknown channel {channel!r}; the channels are {', '.join(CHANNELS)}"
        elif not isinstance(text, str):
            why = f"the {channel!r} variant must be a string, got {type(text).__name__}"
        elif not text.strip():
            why = f"the {channel!r} variant is empty (leave the channel out to send the document)"
        elif _LONE_SURROGATE.search(text):
            why = f"the {channel!r} variant contains a lone UTF-16 surrogate escape, which is not a character"
        else:
            continue
        problems.append(KnowledgeProblem(file, key, why))
    return len(problems) == before


def _check_strings(file: str, key: str, name: str, what: str, value: Any, problems: list[KnowledgeProblem]) -> bool:
    """True when ``value`` is absent or a list of non-empty strings; else the problem is recorded."""
    if value is None:
        return True
    if not isinstance(value, list):
        wrong = type(value).__name__
    else:
        wrong = next((f"a list holding {type(q).__name__}" for q in value if not isinstance(q, str)), "")
    if wrong:
        problems.append(KnowledgeProblem(file, key, f"{name!r} must be a list of strings ({what}), got {wrong}"))
        return False
    if any(not q.strip() for q in value):
        problems.append(KnowledgeProblem(file, key, f"{name!r} contains an empty string"))
        return False
    return True


def parse_document(data: Any, stem: str, file: str, problems: list[KnowledgeProblem]) -> list[Entry]:
    """Turn one decoded knowledge file (object or list form) into entries, collecting problems."""
    if isinstance(data, dict):
        for key in getattr(data, "duplicates", []):
            problems.append(KnowledgeProblem(file, key, "duplicate id (the key appears twice in this file)"))
        items: Iterable[tuple[str, Any]] = ((str(k), v) for k, v in data.items())
    elif isinstance(data, list):
        items = ((str(i), v) for i, v in enumerate(data))
    else:
        problems.append(KnowledgeProblem(file, None, "top level must be an object {id: entry} or a list of entries"))
        return []
    entries = []
    for key, raw in items:
        checked = _check_entry(file, key, raw, problems)
        if checked is not None:
            entries.append(
                Entry(
                    id=entry_id(stem, key),
                    query=checked["query"].strip(),
                    document=checked["document"].strip(),
                    metadata=parse_keywords(checked.get("metadata") or ""),
                    source=file,
                    questions=parse_questions(checked.get("questions"), checked["query"]),
                    negative_questions=parse_questions(checked.get("negative_questions")),
                    categories=parse_keywords(checked.get("categories") or ""),
                    variants=tuple((c, t.strip()) for c, t in (checked.get("variants") or {}).items()),
                    draft=bool(checked.get("draft", False)),
                    valid_from=clean_day(checked.get("valid_from")),
                    valid_until=clean_day(checked.get("valid_until")),
                    related=related_ids(stem, checked.get("related")),
                )
            )
    return entries


def related_ids(stem: str, value: list[str] | None) -> tuple[str, ...]:
    """An entry's ``related`` as full ids, in order, without repeats: a bare key names an entry of the same file."""
    ids = (r.strip() if ":" in r else entry_id(stem, r.strip()) for r in value or ())
    return tuple(dict.fromkeys(ids))


def related_problems(entries: Sequence[Entry], checked: Iterable[Entry] | None = None) -> list[KnowledgeProblem]:
    """Each ``related`` id of ``checked`` (default: all ``entries``) that names none of ``entries``, or the entry
    itself, as a problem of the entry listing it."""
    known = {e.id for e in entries}
    problems = []
    for entry in entries if checked is None else checked:
        for ref in entry.related:
            if ref == entry.id:
                why = f"'related' lists the entry itself ({ref!r}); list other entries"
            elif ref not in known:
                why = f"'related' names an unknown entry {ref!r} (ids are file:key, or a key of the same file)"
            else:
                continue
            problems.append(KnowledgeProblem(entry.source, key_of(entry.id), why))
    return problems


# json.loads raises ValueError (JSONDecodeError, or an integer with thousands of digits) or RecursionError
# (very deep nesting); all of them mean "this file is not usable JSON", never a crash.
JSON_ERRORS = (ValueError, RecursionError)


def json_problem(exc: BaseException) -> str:
    """Why a text is not usable JSON, with line and column when the decoder knows them."""
    if isinstance(exc, json.JSONDecodeError):
        return f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
    if isinstance(exc, RecursionError):
        return "invalid JSON: nested too deeply"
    return f"invalid JSON: {exc}"


# A \uD800-\uDFFF escape: JSON allows it, but alone (not a high + low pair) it decodes to no character at all.
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
LONE_SURROGATE_PROBLEM = (
    "invalid JSON: a \\uD800-\\uDFFF escape that is not half of a pair is not text (it could never be stored "
    "or indexed); remove it, or write the character itself"
)


def lone_surrogate(text: str, data: Any) -> bool:
    """True when ``data``, decoded from ``text``, holds a surrogate escape that is not half of a pair anywhere, in
    the fields an entry uses (checked again per field, with its name) or in any other key or value the file keeps."""
    if not SURROGATE_ESCAPE.search(text):  # the common case costs one regex search
        return False
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def parse_text(text: str, stem: str, file: str, problems: list[KnowledgeProblem]) -> list[Entry]:
    """Decode and validate the text of one knowledge file."""
    try:
        data = json.loads(text, object_pairs_hook=_object_with_duplicates)
    except JSON_ERRORS as exc:
        problems.append(KnowledgeProblem(file, None, json_problem(exc)))
        return []
    before = len(problems)
    entries = parse_document(data, stem, file, problems)
    if len(problems) == before and lone_surrogate(text, data):  # outside the fields parse_document names
        problems.append(KnowledgeProblem(file, None, LONE_SURROGATE_PROBLEM))
        return []
    return entries


def load_entries(folder: str | Path) -> list[Entry]:
    """Load every *.json under ``folder`` (recursively, sorted), or raise one KnowledgeError listing all problems."""
    folder = Path(folder)
    if not folder.is_dir():
        raise KnowledgeError(
            [KnowledgeProblem(str(folder), None, "knowledge folder not found; set knowledge.path in config.yaml")]
        )
    problems: list[KnowledgeProblem] = []
    entries: list[Entry] = []
    seen: dict[str, str] = {}
    for path in knowledge_files(folder):
        file = str(path)
        try:
            text = path.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(KnowledgeProblem(file, None, f"cannot read as UTF-8 text: {exc}"))
            continue
        for entry in parse_text(text, path.stem, file, problems):
            if entry.id in seen:
                problems.append(KnowledgeProblem(file, entry.id, f"duplicate id, also defined in {seen[entry.id]}"))
                continue
            seen[entry.id] = file
            entries.append(entry)
    problems += related_problems(entries)
    if problems:
        raise KnowledgeError(problems)
    return entries


def knowledge_files(folder: Path) -> list[Path]:
    """The knowledge files under ``folder``, in a stable order; hidden files and temp files are skipped."""
    return sorted(
        p
        for p in folder.rglob("*.json")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    )


def fingerprint(entries: Iterable[Entry]) -> str:
    """One hash of a whole knowledge base; equal fingerprints mean nothing searchable changed."""
    h = hashlib.sha256()
    for entry in sorted(entries, key=lambda e: e.id):
        h.update(entry.content_hash.encode())
    return h.hexdigest()[:16]


def knowledge_and_rules_files(folder: Path) -> list[Path]:
    """The knowledge files and, when there is one, the rules file: everything a load of ``folder`` reads."""
    rules = folder / RULES_FILE
    return [*knowledge_files(folder), *([rules] if rules.is_file() else [])]


def folder_signature(folder: str | Path) -> tuple:
    """Cheap stat-based signature of the knowledge and rules files, to notice edits without reading them."""
    folder = Path(folder)
    if not folder.is_dir():
        return ()
    out = []
    for path in knowledge_and_rules_files(folder):
        try:
            st = path.stat()
        except OSError:
            continue
        out.append((str(path), st.st_mtime_ns, st.st_size))
    return tuple(out)
