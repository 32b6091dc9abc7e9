"""Loading knowledge files: both forms, keywords, stable ids, and every validation error at once."""

from __future__ import annotations

import json

import pytest

from bot.errors import KnowledgeError
from bot.knowledge.entries import fingerprint, folder_signature, load_entries, parse_keywords
from tests.support.knowledge import TINY, write_knowledge

pytestmark = pytest.mark.unit


def test_object_form_ids_and_keywords(tmp_path):
    write_knowledge(tmp_path, TINY, "faq.json")
    entries = load_entries(tmp_path)
    assert [e.id for e in entries] == [f"faq:{k}" for k in TINY]
    add = entries[0]
    assert add.query == "怎么添加知识？" and add.metadata == ("添加知识", "知识库")
    assert add.source.endswith("faq.json")


def test_list_form_and_metadata_list(tmp_path):
    write_knowledge(
        tmp_path,
        [
            {"query": "Q1", "document": "D1", "metadata": ["a", "b, c"]},
            {"query": "Q2", "document": "D2"},
        ],
        "list.json",
    )
    e1, e2 = load_entries(tmp_path)
    assert (e1.id, e2.id) == ("list:0", "list:1")
    assert e1.metadata == ("a", "b", "c") and e2.metadata == ()


def test_files_in_subfolders_are_loaded_sorted(tmp_path):
    write_knowledge(tmp_path / "b", {"x": {"query": "q", "document": "d"}}, "two.json")
    write_knowledge(tmp_path / "a", {"x": {"query": "q", "document": "d"}}, "one.json")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "junk.json").write_text("{not json")
    assert [e.id for e in load_entries(tmp_path)] == ["one:x", "two:x"]


def test_keywords_split_on_chinese_and_english_commas():
    assert parse_keywords("校史, 简介，地位、历史") == ("校史", "简介", "地位", "历史")
    assert parse_keywords("") == ()


def test_invalid_json_names_line_and_column(tmp_path):
    (tmp_path / "bad.json").write_text('{\n  "a": {"query": "q", "document": "d"},\n  oops\n}', encoding="utf-8")
    with pytest.raises(KnowledgeError) as err:
        load_entries(tmp_path)
    msg = str(err.value)
    assert "bad.json" in msg and "line 3 column 3" in msg


def test_every_bad_entry_is_listed(tmp_path):
    write_knowledge(
        tmp_path,
        {
            "ok": {"query": "fine", "document": "fine"},
            "no_query": {"document": "d"},
            "empty_doc": {"query": "q", "document": "   "},
            "wrong_type": {"query": 3, "document": "d"},
            "bad_meta": {"query": "q", "document": "d", "metadata": {"k": 1}},
            "not_object": "just a string",
        },
        "kb.json",
    )
    with pytest.raises(KnowledgeError) as err:
        load_entries(tmp_path)
    problems = {(p.entry, p.problem.split()[0]) for p in err.value.problems}
    assert {p.entry for p in err.value.problems} == {"no_query", "empty_doc", "wrong_type", "bad_meta", "not_object"}
    assert all(p.file.endswith("kb.json") for p in err.value.problems)
    assert ("no_query", "missing") in problems
    text = str(err.value)
    assert "'no_query'" in text and "'empty_doc'" in text and "5 problem" in text


def test_duplicate_key_in_one_file(tmp_path):
    (tmp_path / "dup.json").write_text(
        '{"a": {"query": "q1", "document": "d1"}, "a": {"query": "q2", "document": "d2"}}', encoding="utf-8"
    )
    with pytest.raises(KnowledgeError, match="duplicate id") as err:
        load_entries(tmp_path)
    assert err.value.problems[0].entry == "a"


def test_duplicate_id_across_files(tmp_path):
    write_knowledge(tmp_path / "x", {"a": {"query": "q", "document": "d"}}, "faq.json")
    write_knowledge(tmp_path / "y", {"a": {"query": "q", "document": "d"}}, "faq.json")
    with pytest.raises(KnowledgeError, match="duplicate id, also defined in"):
        load_entries(tmp_path)


def test_top_level_scalar_and_missing_folder(tmp_path):
    (tmp_path / "n.json").write_text("42")
    with pytest.raises(KnowledgeError, match="top level must be"):
        load_entries(tmp_path)
    with pytest.raises(KnowledgeError, match="knowledge folder not found"):
        load_entries(tmp_path / "nope")


def test_fingerprint_and_signature_change_with_content(tmp_path):
    path = write_knowledge(tmp_path, TINY)
    fp1, sig1 = fingerprint(load_entries(tmp_path)), folder_signature(tmp_path)
    data = json.loads(path.read_text())
    data["add"]["document"] += "!"
    path.write_text(json.dumps(data, ensure_ascii=False))
    assert fingerprint(load_entries(tmp_path)) != fp1
    assert folder_signature(tmp_path) != sig1


def test_starter_knowledge_is_valid():
    from tests.support.knowledge import ROOT

    entries = load_entries(ROOT / "knowledge")
    assert len(entries) >= 80
    assert any(any("\u4e00" <= ch <= "\u9fff" for ch in e.query) for e in entries)
    assert any(e.query.isascii() for e in entries)


def test_a_lone_surrogate_escape_is_a_problem_naming_file_and_entry(tmp_path):
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "s.json").write_text(
        '{"a": {"query": "bad \\ud800 x", "document": "d"}, '
        '"b": {"query": "emoji \\ud83d\\ude00 ok", "document": "fine"}}',
        encoding="utf-8",
    )
    with pytest.raises(KnowledgeError) as err:
        load_entries(folder)
    assert [(p.entry, "surrogate" in p.problem) for p in err.value.problems] == [("a", True)]
    assert str(folder / "s.json") in str(err.value)
    (folder / "s.json").write_text('{"b": {"query": "emoji \\ud83d\\ude00 ok", "document": "fine"}}', encoding="utf-8")
    assert load_entries(folder)[0].query == "emoji 😀 ok"  # a proper pair is one character


def test_alternative_questions_in_both_forms_and_round_trip(tmp_path):
    from bot.knowledge.entries import entry_from_record, entry_record, write_entries

    write_knowledge(
        tmp_path / "kb",
        {
            "wifi": {
                "query": "无线网络怎么连接",
                "document": "d",
                "questions": [" 宿舍上不了网 ", "无线网络怎么连接", "WiFi 密码", "WiFi 密码"],
            }
        },
    )
    write_knowledge(
        tmp_path / "kb",
        [{"query": "Q", "document": "D", "questions": ["other Q"]}, {"query": "P", "document": "D"}],
        "list.json",
    )
    wifi, listed, plain = sorted(load_entries(tmp_path / "kb"), key=lambda e: e.id != "faq:wifi")
    assert wifi.questions == ("宿舍上不了网", "WiFi 密码")  # stripped; duplicates and the query itself dropped
    assert wifi.phrasings == ("无线网络怎么连接", "宿舍上不了网", "WiFi 密码")
    assert (listed.id, listed.questions, plain.questions) == ("list:0", ("other Q",), ())
    assert entry_from_record(entry_record(wifi)) == wifi and "questions" not in entry_record(plain)
    write_entries([wifi, listed, plain], tmp_path / "copy")
    assert load_entries(tmp_path / "copy") == [wifi, listed, plain]


def test_alternative_questions_are_in_the_content_hash(tmp_path):
    import dataclasses

    path = write_knowledge(tmp_path, {"a": {"query": "q", "document": "d"}})
    plain = load_entries(tmp_path)[0]
    path.write_text(json.dumps({"a": {"query": "q", "document": "d", "questions": ["q2"]}}), encoding="utf-8")
    phrased = load_entries(tmp_path)[0]
    assert phrased.content_hash != plain.content_hash
    assert dataclasses.replace(phrased, questions=("q3",)).content_hash != phrased.content_hash
    assert dataclasses.replace(phrased, questions=()).content_hash == plain.content_hash  # old indexes stay valid


@pytest.mark.parametrize(
    "questions, problem",
    [
        ("宿舍上不了网", "'questions' must be a list of strings (other phrasings of the query), got str"),
        (["ok", 3], "got a list holding int"),
        (["ok", "  "], "'questions' contains an empty string"),
        (["bad \ud800"], "'questions' contains a lone UTF-16 surrogate"),
    ],
)
def test_bad_alternative_questions_name_file_and_entry(tmp_path, questions, problem):
    (tmp_path / "kb.json").write_text(
        json.dumps([{"query": "q", "document": "d"}, {"query": "q", "document": "d", "questions": questions}]),
        encoding="utf-8",
    )
    with pytest.raises(KnowledgeError) as err:
        load_entries(tmp_path)
    [found] = err.value.problems
    assert found.entry == "1" and found.file.endswith("kb.json") and problem in found.problem


def test_a_lone_surrogate_escape_outside_the_entry_fields_is_refused_and_an_upload_of_it_stores_nothing(tmp_path):
    from bot.errors import BotError
    from bot.knowledge.store import KnowledgeStore

    # found by tests/knowledge/test_fuzz_knowledge.py: an extra key's value held "\ud800,\udc00" (two halves, not a pair)
    text = '[{"query": "食堂在哪里", "document": "d", "extra": {"x\\ud800,\\udc00": null}}]'
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "s.json").write_text(text, encoding="utf-8")
    with pytest.raises(KnowledgeError, match="not half of a pair"):
        load_entries(folder)
    store = KnowledgeStore(tmp_path / "upload", tmp_path / "locks")
    with pytest.raises(BotError, match="not half of a pair"):
        store.import_file("upload.json", text)
    assert not (tmp_path / "upload" / "upload.json").exists()
    good = '[{"query": "食堂在哪里", "document": "d", "extra": {"x\\ud83d\\ude00": null}}]'  # a pair is a character
    assert KnowledgeStore(tmp_path / "ok", tmp_path / "locks2").import_file("ok.json", good)  # stored: its ids
