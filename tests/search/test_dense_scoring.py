"""Encoding an index's texts: the rows come back in the entries' order whatever order they were encoded in."""

from __future__ import annotations

import numpy as np
import pytest

from bot.knowledge.entries import Entry
from bot.search.dense_scoring import DenseScoring, encode_units
from bot.search.encoders.base import DOCUMENT, QUESTION
from tests.support.hash_encoder import HashEncoder

pytestmark = pytest.mark.unit


class Recording(HashEncoder):
    """The hash encoder, remembering the texts of each call in the order it was given them."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[str]] = []

    def embed_documents(self, texts):
        self.calls.append(list(texts))
        return super().embed_documents(texts)


def test_units_are_encoded_longest_first_and_returned_in_the_entries_order():
    entries = [
        Entry(id="short", query="校歌", document="短。"),
        Entry(id="long", query="图书馆开放时间是什么时候", document="图书馆每天早上八点开放，晚上十点关闭。" * 5),
        Entry(id="mid", query="食堂在哪", document="食堂在东门旁边。"),
    ]
    scoring = DenseScoring()
    scoring.embed_template = "{query} {document}"
    encoder = Recording()
    vectors, owners = encode_units(encoder, scoring.unit_texts, entries, None)
    [questions, passages] = encoder.calls
    assert [len(t) for t in questions] == sorted((len(t) for t in questions), reverse=True)
    assert [len(t) for t in passages] == sorted((len(t) for t in passages), reverse=True)
    assert owners == [(e.id, role) for e in entries for role in (QUESTION, DOCUMENT)]
    expected = [text for e in entries for _, text in scoring.unit_texts(e)]
    assert np.allclose(vectors, HashEncoder().embed_documents(expected))
