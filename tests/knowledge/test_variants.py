"""Per-channel variants of an entry's document: loaded, validated with a clear error, kept through records and
files, and part of the content hash (the indexes keep the record a verbatim reply is written from)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from bot.errors import KnowledgeError
from bot.knowledge.entries import (
    CHANNELS,
    entry_from_record,
    entry_record,
    folder_signature,
    load_entries,
    write_entries,
)
from tests.support.knowledge import write_knowledge

pytestmark = pytest.mark.unit

PHONE = {
    "query": "校医院电话是多少？",
    "document": "校医院电话：020-8411 2233（**24 小时**），详见[校医院主页](https://example.edu/clinic)。",
    "variants": {"wecom": " 校医院电话：020-84112233，24 小时。 ", "api": "020-84112233"},
}


def test_variants_load_and_each_channel_gets_its_own_or_the_document(tmp_path):
    write_knowledge(tmp_path, {"phone": PHONE})
    (entry,) = load_entries(tmp_path)
    assert entry.variants == (("wecom", "校医院电话：020-84112233，24 小时。"), ("api", "020-84112233"))
    assert entry.document_for("wecom") == "校医院电话：020-84112233，24 小时。"  # stripped like the document
    assert entry.document_for("api") == "020-84112233"
    assert entry.document_for("web") == entry.document_for(None) == entry.document
    assert entry.variant("feishu") is None


def test_variants_survive_records_and_files_and_are_in_the_content_hash(tmp_path):
    write_knowledge(tmp_path / "kb", {"phone": PHONE, "plain": {"query": "q", "document": "d"}})
    phone, plain = load_entries(tmp_path / "kb")
    assert entry_from_record(entry_record(phone)) == phone and "variants" not in entry_record(plain)
    write_entries([phone, plain], tmp_path / "copy")
    assert load_entries(tmp_path / "copy") == [phone, plain]
    edited = dataclasses.replace(phone, variants=(("wecom", "改过的"),))
    assert edited.content_hash != phone.content_hash  # an edited variant reaches the indexes' records
    without = dataclasses.replace(phone, variants=())
    assert (
        without.content_hash
        == dataclasses.replace(plain, id=phone.id, query=phone.query, document=phone.document).content_hash
    )


@pytest.mark.parametrize(
    "variants, problem",
    [
        ({"wechat": "x"}, "'variants' names an unknown channel 'wechat'; the channels are " + ", ".join(CHANNELS)),
        ({"wecom": 3}, "the 'wecom' variant must be a string, got int"),
        ({"api": "  "}, "the 'api' variant is empty"),
        (["wecom", "x"], "'variants' must be an object {channel: text}, got list"),
        ({"feishu": "bad \ud800"}, "the 'feishu' variant contains a lone UTF-16 surrogate"),
    ],
)
def test_a_bad_variant_names_file_entry_and_the_channels(tmp_path, variants, problem):
    (tmp_path / "kb.json").write_text(
        json.dumps(
            {"ok": {"query": "q", "document": "d"}, "bad": {"query": "q", "document": "d", "variants": variants}}
        ),
        encoding="utf-8",
    )
    with pytest.raises(KnowledgeError) as err:
        load_entries(tmp_path)
    [found] = err.value.problems
    assert found.entry == "bad" and found.file.endswith("kb.json") and problem in found.problem


def test_a_channel_listed_twice_is_a_problem(tmp_path):
    (tmp_path / "kb.json").write_text(
        '{"a": {"query": "q", "document": "d", "variants": {"api": "x", "api": "y"}}}', encoding="utf-8"
    )
    with pytest.raises(KnowledgeError, match="'variants' lists the channel 'api' twice"):
        load_entries(tmp_path)


def test_the_folder_signature_notices_the_rules_file(tmp_path):
    write_knowledge(tmp_path, {"a": {"query": "q", "document": "d"}})
    before = folder_signature(tmp_path)
    (tmp_path / "rules.yaml").write_text("- exact: q\n  entry: faq:a\n", encoding="utf-8")
    assert folder_signature(tmp_path) != before
    assert [e.id for e in load_entries(tmp_path)] == ["faq:a"]  # the rules file is not a knowledge file


def test_an_edit_through_the_store_keeps_the_variants(tmp_path):
    from bot.knowledge.store import KnowledgeStore

    write_knowledge(tmp_path / "kb", {"phone": PHONE})
    store = KnowledgeStore(tmp_path / "kb", tmp_path / "locks")
    store.upsert_entry("faq.json", "phone", "校医院的电话？", "新的电话：020-1234", "电话")
    (entry,) = load_entries(tmp_path / "kb")
    assert entry.document == "新的电话：020-1234" and entry.document_for("api") == "020-84112233"


def test_the_channels_are_the_sources_the_front_ends_record():
    import re

    from bot.api.feishu.callback import CHANNEL
    from tests.support.knowledge import ROOT

    code = "".join(
        p.read_text(encoding="utf-8") for p in (ROOT / "bot").rglob("*.py") if p.parts[-2] in ("api", "ui", "wecom")
    )
    assert set(re.findall(r'source="(\w+)"', code)) | {CHANNEL} == set(CHANNELS)
