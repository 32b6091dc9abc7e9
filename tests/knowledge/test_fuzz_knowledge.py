"""Property tests: whatever lands in a knowledge file, loading and importing either succeed or raise our own errors."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import event as hypothesis_event
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from bot.errors import BotError, KnowledgeError
from bot.knowledge.entries import Entry, load_entries
from bot.knowledge.store import KnowledgeStore

pytestmark = pytest.mark.unit


def event(label: str) -> None:
    """Record a hypothesis event when running under @given (the extreme cases call the property directly)."""
    if currently_in_test_context():
        hypothesis_event(label)


# Lone surrogates cannot be written as UTF-8 at all, so they are not something a file can contain.
TEXT = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=30)
SHORT_TEXT = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=8)

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | TEXT,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(SHORT_TEXT, children, max_size=5),
    max_leaves=25,
)

# Values a careless edit puts where a string belongs.
WRONG = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.just("")
    | st.just("   \n\t")
    | st.lists(TEXT, max_size=3)
    | st.dictionaries(SHORT_TEXT, TEXT, max_size=2)
    | st.lists(st.integers(), max_size=3)
)
GOOD = st.sampled_from(["图书馆几点开门？", "食堂在哪里", "How do I add knowledge?", "退款流程", "校园网\t账号"])
FIELD = GOOD | TEXT | WRONG


@st.composite
def near_valid_entry(draw):
    """An entry dict whose fields are mostly right, some missing, wrongly typed, empty, or extra."""
    entry = {}
    for name in ("query", "document", "metadata"):
        roll = draw(st.integers(0, 9))
        if roll >= 3:  # mostly right, so whole files pass often enough to test the success path too
            entry[name] = draw(GOOD | st.lists(GOOD, max_size=3)) if name == "metadata" else draw(GOOD)
        elif roll >= 1:  # now and then a field is wrong, or (roll 0) left out
            entry[name] = draw(FIELD)
    if draw(st.booleans()):
        entry[draw(SHORT_TEXT)] = draw(JSON_VALUES)
    return entry


NEAR_VALID_DOCS = st.one_of(
    st.dictionaries(SHORT_TEXT, near_valid_entry() | JSON_VALUES, max_size=6),
    st.lists(near_valid_entry() | JSON_VALUES, max_size=6),
    near_valid_entry(),  # a lone entry where a collection belongs
)


@st.composite
def mangled_json_text(draw):
    """Serialised near-valid knowledge, then damaged the ways hand edits do it: cut, a key doubled, a stray char."""
    text = json.dumps(draw(NEAR_VALID_DOCS), ensure_ascii=draw(st.booleans()), indent=draw(st.sampled_from([None, 2])))
    how = draw(st.sampled_from(["none", "cut", "insert", "duplicate"]))
    if how == "cut" and text:
        text = text[: draw(st.integers(0, len(text) - 1))]
    elif how == "insert":
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from([",", "{", "]", '"', ":", "\\", "\x00", "，"])) + text[at:]
    elif how == "duplicate" and text.startswith("{") and len(text) > 2:
        text = '{"dup": {"query": "q", "document": "d"}, "dup": {"query": "q", "document": "d"}, ' + text[1:]
    return text


RAW_BYTES = st.one_of(
    st.binary(max_size=200),
    st.binary(max_size=200).map(lambda b: b"\xef\xbb\xbf" + b),  # a BOM, then anything
    st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.sampled_from(
        [
            b"",
            b"\xef\xbb\xbf",
            b"null",
            b"[]",
            b"{}",
            b'"text"',
            b"42",
            b"NaN",
            b"[{}]",
            b'{"a": []}',
            '{"a": {"query": "问", "document": "答"}}'.encode("gbk"),
        ]
    ),
)


def check_load(folder: Path, path: Path) -> None:
    """The property: a list of well-formed entries, or KnowledgeError whose every problem names this file."""
    try:
        entries = load_entries(folder)
    except KnowledgeError as exc:
        assert exc.problems
        assert all(p.file == str(path) for p in exc.problems), exc.problems
        assert str(path) in str(exc)
        event("load: KnowledgeError")
        return
    event("load: entries" if entries else "load: empty")
    assert isinstance(entries, list)
    for e in entries:
        assert isinstance(e, Entry) and e.id.startswith(path.stem + ":") and e.source == str(path)
        assert isinstance(e.query, str) and e.query.strip() and isinstance(e.document, str) and e.document.strip()
        assert all(isinstance(m, str) and m.strip() for m in e.metadata)


def check_import(text: str) -> None:
    """The property for uploads: ids of the stored file, or a BotError (never anything else)."""
    with tempfile.TemporaryDirectory() as tmp:
        store = KnowledgeStore(Path(tmp) / "knowledge", Path(tmp) / "locks")
        try:
            ids = store.import_file("upload.json", text)
        except BotError:
            assert not (Path(tmp) / "knowledge" / "upload.json").exists()  # a refused upload leaves nothing behind
            event("import: refused")
            return
        event("import: stored")
        # Whatever was accepted must load back exactly the same.
        assert [e.id for e in load_entries(Path(tmp) / "knowledge")] == ids


def run_property(data: bytes) -> None:
    """Write ``data`` as the only knowledge file, then check loading and importing it."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "knowledge"
        folder.mkdir()
        path = folder / "faq.json"
        path.write_bytes(data)
        check_load(folder, path)
    check_import(data.decode("utf-8", "replace"))


FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(JSON_VALUES | NEAR_VALID_DOCS)
def test_any_json_value_loads_or_raises_knowledge_error(value):
    run_property(json.dumps(value, ensure_ascii=False).encode("utf-8"))


@FUZZ
@given(mangled_json_text())
def test_mangled_json_text_loads_or_raises_knowledge_error(text):
    run_property(text.encode("utf-8"))


@FUZZ
@given(RAW_BYTES)
def test_raw_bytes_load_or_raise_knowledge_error(data):
    run_property(data)


# Inputs the strategies above are too small to reach; each escapes today as a non-BotError.
EXTREME = {
    "deep_nesting": "[" * 100_000,
    "huge_integer": '{"a": {"query": "q", "document": "d", "metadata": "m", "n": ' + "9" * 5000 + "}}",
}


@pytest.mark.parametrize("name", list(EXTREME))
def test_extreme_json_loads_or_raises_knowledge_error(name):
    run_property(EXTREME[name].encode("utf-8"))
