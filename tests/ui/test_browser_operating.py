"""The operator's week in Chromium: a visitor says an answer did not solve it, the analytics page shows the
outcomes and the entries that fail, the entry records tab sorts and exports them, and a knowledge edit that would
lose an answer shows the replay and waits for a confirmation; a draft is published from the form."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from bot.chat.recorder import TurnRecorder
from bot.config.settings import load_settings
from bot.conversations.turn_log import TurnLog
from bot.factory import build_knowledge_base
from tests.support.browser import ADMIN_ENV, App, ask, offline_env, open_knowledge_tab, open_tab, shot

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.e2e]


def shows(page, selector: str, text: str) -> None:
    """Wait until the element's text holds ``text`` (a table fills after its event)."""
    page.wait_for_function(
        "([s, t]) => (document.querySelector(s)?.innerText || '').includes(t)", arg=[selector, text], timeout=30000
    )


def last_week(config: Path) -> None:
    """Conversations of the three days before today in the app's log, so the outcome lines have days to draw."""
    settings = load_settings(config)
    now = [datetime.now(UTC)]
    log = TurnLog(settings.resolve(settings.state_dir) / settings.log.path, clock=lambda: now[0])
    kb = dataclasses.replace(build_knowledge_base(settings), recorder=TurnRecorder(log))
    days = {  # per day: conversations, each its questions; "没用" says an answer did not help
        3: [["食堂在哪里？"], ["图书馆开放时间"], ["怎么添加知识？"]],
        2: [["食堂在哪里？", "没用"], ["图书馆开放时间"], ["学费多少钱"]],
        1: [["食堂在哪里？", "食堂在哪里"], ["图书馆开放时间"], ["怎么添加知识？", "没用"], ["阈值是什么意思？"]],
    }
    for back, conversations in days.items():
        for n, questions in enumerate(conversations):
            for minute, question in enumerate(questions):
                now[0] = datetime.now(UTC).replace(hour=10, minute=minute) - timedelta(days=back)
                kb.ask(question, source="web", session=f"day{back}-{n}")
    log.close()


def test_the_week_from_the_numbers_to_a_published_fix(browser, app_config):
    raw = yaml.safe_load(app_config.read_text(encoding="utf-8"))
    raw["feedback"] = {"ask_solved": "every"}
    app_config.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    last_week(app_config)
    knowledge = Path(raw["knowledge"]["path"])
    app = App(app_config, dict(offline_env(), **ADMIN_ENV))
    try:
        page = open_knowledge_tab(browser, app)
        open_tab(page, "对话 / Chat")
        ask(page, "食堂在哪里？")
        page.locator("#kb-solved").get_by_text("解决您的问题了吗").wait_for(timeout=30000)
        shot(page, "operating-solved-question")
        page.locator("#kb-solved-no").click()
        page.locator("#kb-solved").wait_for(state="hidden", timeout=30000)
        for question in ("宿舍几点熄灯？", "宿舍几点熄灯", "图书馆开放时间"):
            ask(page, question)

        open_tab(page, "统计 / Analytics")
        status = page.locator("#kb-stats-status")
        status.get_by_text("解决率 / resolved").wait_for(timeout=60000)
        assert "独立接待率 / deflected 100%" in status.inner_text()
        page.locator("#kb-stats-outcomes").get_by_text("解决率 / resolved").first.wait_for(timeout=30000)
        shows(page, "#kb-stats-failing_entries", "faq:canteen")
        shows(page, "#kb-stats-down_reasons", "not_solved")
        shot(page, "operating-analytics")

        open_tab(page, "条目记录 / Entry records")
        shows(page, "#kb-rec-table", "faq:canteen")
        page.locator("#kb-rec-export").click()
        page.locator("#kb-rec-files").get_by_text(".xlsx").wait_for(timeout=30000)
        shot(page, "operating-entry-records")

        open_tab(page, "知识管理 / Knowledge")
        page.locator("#kb-k-key input").fill("library")
        page.locator("#kb-k-key input").press("Enter")
        page.locator("#kb-k-mode").get_by_text("library").wait_for(timeout=30000)
        page.locator("#kb-k-query textarea, #kb-k-query input").first.fill("校史馆简介")
        page.locator("#kb-k-document textarea").fill("校史馆在南校园。")
        page.locator("#kb-k-metadata textarea, #kb-k-metadata input").first.fill("校史馆")
        page.locator("#kb-k-save").click()
        held = page.locator("#kb-k-status")
        held.get_by_text("失去答案 / Lose their answer").wait_for(timeout=60000)
        assert "图书馆开放时间" in held.inner_text()
        shot(page, "operating-replay-before-save")
        saved = json.loads((knowledge / "faq.json").read_text(encoding="utf-8"))["library"]
        assert saved["query"] == "图书馆开放时间"  # not written until confirmed
        page.locator("#kb-k-save-confirm").click()
        held.get_by_text("index updated").wait_for(timeout=60000)
        assert json.loads((knowledge / "faq.json").read_text(encoding="utf-8"))["library"]["query"] == "校史馆简介"

        page.locator("#kb-k-new").click()
        page.locator("#kb-k-key input").fill("dorm")
        page.locator("#kb-k-query textarea, #kb-k-query input").first.fill("宿舍几点熄灯？")
        page.locator("#kb-k-document textarea").fill("宿舍晚上十一点熄灯。")
        page.locator("#kb-k-draft input").check()
        page.locator("#kb-k-save").click()
        held.get_by_text("index updated").wait_for(timeout=60000)
        assert json.loads((knowledge / "faq.json").read_text(encoding="utf-8"))["dorm"]["draft"] is True
        page.locator("#kb-k-key input").fill("dorm")
        page.locator("#kb-k-key input").press("Enter")
        page.locator("#kb-k-mode").get_by_text("dorm").wait_for(timeout=30000)
        page.locator("#kb-k-publish").click()
        held.get_by_text("新得到答案 / Gain an answer").wait_for(timeout=60000)
        assert "宿舍几点熄灯" in held.inner_text()
        shot(page, "operating-published-draft")
        assert "draft" not in json.loads((knowledge / "faq.json").read_text(encoding="utf-8"))["dorm"]

        page.locator("#kb-k-record").click()
        shows(page, "#kb-rec-table", "faq:dorm")
        assert page.locator("#kb-rec-text textarea, #kb-rec-text input").first.input_value() == "faq:dorm"
    finally:
        app.stop()
