"""Entry ids ``<stem>:<key>``: built and taken apart in one place (bot/knowledge/entry_ids.py)."""

from __future__ import annotations

import pytest

from bot.knowledge.entries import load_entries
from bot.knowledge.entry_ids import EntryId, entry_id, key_of, stem_of
from tests.support.knowledge import write_knowledge

pytestmark = pytest.mark.unit


def test_a_key_may_hold_a_colon_and_round_trips():
    assert (stem_of("faq:a:b"), key_of("faq:a:b")) == ("faq", "a:b")
    assert EntryId.parse(" faq:a:b ") == EntryId("faq", "a:b") and str(EntryId("faq", "a:b")) == "faq:a:b"
    assert entry_id("faq", "a:b") == "faq:a:b"


@pytest.mark.parametrize("text", ["", "faq", "faq:", ":add", "  "])
def test_what_is_not_an_id_parses_to_none(text):
    assert EntryId.parse(text) is None


def test_loaded_entries_carry_ids_that_parse_back_to_their_file_and_key(tmp_path):
    write_knowledge(tmp_path / "kb", {"time:open": {"query": "几点开门？", "document": "八点。"}}, name="hours.json")
    (entry,) = load_entries(tmp_path / "kb")
    assert EntryId.parse(entry.id) == EntryId("hours", "time:open")
