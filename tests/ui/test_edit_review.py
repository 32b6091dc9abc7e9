"""The knowledge tab's review: a save or a restore that loses answers waits for a confirmation, a draft is
published from the form, and with approval required only a publisher (cookie from /publisher/login) publishes."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from bot.config.operating import PublisherAccount
from bot.config.variants import replace
from bot.evaluation.replay import replayer_from_settings
from bot.factory import build_knowledge_base, build_store
from bot.handoff.passwords import hash_password
from bot.ui.knowledge_tab import KnowledgeHandlers, result_html
from bot.ui.publishers import PublisherAuth
from bot.ui.restore import RestoreHandlers
from bot.ui.review import EditReview

NEEDS_PUBLISHER = "/publisher/login"  # the refusal names where a publisher logs in

pytestmark = pytest.mark.unit


def handlers(settings, review_settings=None):
    kb, store = build_knowledge_base(settings), build_store(settings)
    for question in ("图书馆开放时间", "食堂在哪里？"):
        kb.ask(question, source="web", session=question)
    replayer = replayer_from_settings(kb.search, store, kb.recorder, settings)
    return KnowledgeHandlers(kb.editor, EditReview(replayer, *(review_settings or ()))), kb


def saved(kb_dir):
    return json.loads((kb_dir / "faq.json").read_text(encoding="utf-8"))


def test_a_save_that_loses_an_answer_waits_for_the_confirmation(settings, kb_dir):
    k, _ = handlers(settings)
    loaded = {"file": "faq.json", "key": "library", "version": k.editor.entry("faq.json", "library").version}
    args = ("faq.json", "library", "校史馆简介", "校史馆在南校园。", "校史馆", loaded, "", False, "", "")
    held = k.save(*args)
    assert "失去答案 / Lose their answer" in held[0] and "图书馆开放时间" in held[0] and held[-1]["visible"] is True
    assert saved(kb_dir)["library"]["query"] == "图书馆开放时间"
    done = k.save(*args, True)
    assert "index updated" in done[0] and saved(kb_dir)["library"]["query"] == "校史馆简介"
    assert "replayed 2 questions" in done[0]  # the diff stays beside the result


def test_bad_dates_are_refused_before_anything_runs(settings, kb_dir):
    k, _ = handlers(settings)
    out = k.save("faq.json", None, "新问题", "新答案", "", None, "", False, "2026-13-01", "")
    assert "&#x27;valid_from&#x27; must be an ISO date" in out[0] and "新问题" not in json.dumps(
        saved(kb_dir), ensure_ascii=False
    )


def test_with_approval_required_only_a_publisher_publishes(settings, kb_dir):
    lin = PublisherAccount(name="lin", password_hash=hash_password("pw-of-lin"))
    s = replace(settings, "knowledge.publishers", [lin])
    auth = PublisherAuth.publishers(s)
    k, kb = handlers(s, (True, auth))
    nobody, publisher = SimpleNamespace(cookies={}), SimpleNamespace(cookies={auth.cookie: auth.token("lin")})
    refused = k.save("faq.json", "dorm", "宿舍几点熄灯？", "十一点。", "", None, "", False, "", "", False, nobody)
    assert NEEDS_PUBLISHER in refused[0] and "dorm" not in saved(kb_dir)
    drafted = k.save("faq.json", "dorm", "宿舍几点熄灯？", "十一点。", "", None, "", True, "", "", False, nobody)
    assert "index updated" in drafted[0] and saved(kb_dir)["dorm"]["draft"] is True
    loaded = {"file": "faq.json", "key": "dorm", "version": k.editor.entry("faq.json", "dorm").version, "draft": True}
    assert NEEDS_PUBLISHER in k.publish(loaded, False, nobody)[0]
    forged = SimpleNamespace(cookies={auth.cookie: auth.token("lin") + "x"})
    assert NEEDS_PUBLISHER in k.publish(loaded, False, forged)[0]
    published = k.publish(loaded, False, publisher)
    assert "index updated" in published[0] and "draft" not in saved(kb_dir)["dorm"]
    assert kb.ask("宿舍几点熄灯？").hits[0].entry.id == "faq:dorm"
    assert auth.check_password("lin", "pw-of-lin") and not auth.check_password("lin", "guess")


def test_a_restore_that_loses_an_answer_waits_for_the_confirmation(settings, kb_dir):
    k, kb = handlers(settings)
    kb.editor.add("faq.json", "library2", "食堂在哪里？", "二食堂在北区。", "")  # the original is kept first
    version = kb.editor.history("faq.json")[0].version
    restore = RestoreHandlers(kb.editor, result_html, lambda exc: str(exc), k.review)
    kb.ask("食堂在哪里？", source="web", session="again")
    held = restore.restore("faq.json", version)
    assert held[2]["visible"] is True and "library2" in saved(kb_dir)
    assert "换了条目 / Change entry" in held[0] and "faq:library2" in held[0]
    done = restore.restore("faq.json", version, True)
    assert "已恢复 / Restored" in done[0] and "library2" not in saved(kb_dir) and done[2]["visible"] is False
    unknown = restore.restore("faq.json", "20990101T000000-zzzz")
    assert "no kept version" in unknown[0] and unknown[2]["visible"] is False
