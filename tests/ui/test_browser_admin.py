"""Admins and chat users apart, in headless Chromium against `python app.py`: the unanswered inbox, a new entry
from it answering the question `direct`, thumbs down into the log and the inbox, and the admin endpoints refusing
chat users over raw HTTP. Fixtures as in test_browser."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest
import yaml

from tests.support.browser import (
    ADMIN_ENV,
    App,
    ask,
    offline_env,
    open_as_admin,
    open_knowledge_tab,
    open_page,
    open_tab,
    shot,
    tab_names,
)
from tests.support.serving import call_event as call

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.e2e]

OFF_TOPIC = "停车场怎么收费？"
ADMIN_TABS = ("知识管理 / Knowledge", "待解决问题 / Unanswered", "对话日志 / Log", "统计 / Analytics")


def strategy(page) -> str:
    return page.locator("#kb-sources .kb-strategy").inner_text()


def test_a_last_resort_question_reaches_the_inbox_and_a_new_entry_answers_it(browser, app_config):
    app = App(app_config, dict(offline_env(), **ADMIN_ENV))
    try:
        page = open_knowledge_tab(browser, app)  # logged in as admin
        open_tab(page, "对话 / Chat")
        ask(page, OFF_TOPIC)
        assert "last resort" in strategy(page)
        open_tab(page, "待解决问题 / Unanswered")
        page.locator("#kb-inbox-table").get_by_text(OFF_TOPIC).wait_for(timeout=30000)
        assert "last_resort ×1" in page.locator("#kb-inbox-table").inner_text()
        # The first group is picked: the new-entry form starts from its question.
        page.wait_for_function(
            f"() => document.querySelector('#kb-inbox-query textarea').value === '{OFF_TOPIC}'", timeout=30000
        )
        page.locator("#kb-inbox-document textarea").fill("校内停车每小时五元。")
        page.locator("#kb-inbox-metadata textarea").fill("停车,收费")
        shot(page, "inbox")
        page.locator("#kb-inbox-new").click()
        page.locator("#kb-inbox-status").get_by_text("index updated").wait_for(timeout=30000)
        page.locator("#kb-inbox-table").get_by_text("No unanswered questions").wait_for(timeout=30000)
        open_tab(page, "对话 / Chat")
        ask(page, OFF_TOPIC.rstrip("？"))  # the same question (another text, so ask() waits for the new answer)
        assert "direct" in strategy(page) and "每小时五元" in page.locator("#kb-chat .bot").last.inner_text()
    finally:
        app.stop()
    saved = json.loads(
        (Path(yaml.safe_load(app_config.read_text(encoding="utf-8"))["knowledge"]["path"]) / "faq.json").read_text(
            encoding="utf-8"
        )
    )
    assert any(v.get("query") == OFF_TOPIC for v in saved.values())


def test_thumbs_down_lands_in_the_log_and_the_inbox(browser, app_config):
    app = App(app_config, dict(offline_env(), **ADMIN_ENV))
    try:
        user = open_page(browser, app.url)  # a chat user: no admin tabs
        assert "对话 / Chat" in tab_names(user) and not set(ADMIN_TABS) & set(tab_names(user))
        ask(user, "怎么添加知识？")
        user.locator("#kb-chat .bot").last.hover()
        user.locator("#kb-chat").get_by_label(re.compile(r"^(Dislike|踩)$")).last.click()  # the page is zh-CN
        reason = user.locator("#kb-feedback-reason textarea")
        reason.wait_for(state="visible", timeout=30000)
        reason.fill("答非所问")
        user.locator("#kb-feedback-send").click()
        reason.wait_for(state="hidden", timeout=30000)
        shot(user, "chat-thumbs-down")

        admin = open_knowledge_tab(browser, app)
        open_tab(admin, "对话日志 / Log")
        table = admin.locator("#kb-log-table")
        table.get_by_text("答非所问").wait_for(timeout=30000)
        row = table.locator("tr", has_text="怎么添加知识？").first.inner_text()
        assert "👎" in row and "web" in row and "direct" in row
        shot(admin, "log")
        open_tab(admin, "待解决问题 / Unanswered")
        inbox = admin.locator("#kb-inbox-table")
        inbox.get_by_text("怎么添加知识？").first.wait_for(timeout=30000)
        assert "答非所问" in inbox.inner_text()
    finally:
        app.stop()


def test_a_chat_user_cannot_reach_the_admin_endpoints(browser, app_config):
    kb = Path(yaml.safe_load(app_config.read_text(encoding="utf-8"))["knowledge"]["path"])
    before = (kb / "faq.json").read_text(encoding="utf-8")
    app = App(app_config, dict(offline_env(), **ADMIN_ENV))
    try:
        page = open_page(browser, app.url)
        ask(page, OFF_TOPIC)
        assert "对话 / Chat" in tab_names(page) and not set(ADMIN_TABS) & set(tab_names(page))
        refused: list[tuple[str, list[object]]] = [
            ("save_entry", ["faq.json", "", "坏条目", "不该保存", "", None, "", False, "", ""]),
            ("inbox", ["latest"]),
            ("inbox_dismiss", [OFF_TOPIC, "latest"]),
            ("log_turns", ["", "", ""]),
            ("analytics", ["", "", "", ""]),
            ("analytics_export", ["", "", "", ""]),
        ]
        for api_name, data in refused:
            event, payload = call(app.url, api_name, data)
            assert event == "error" and "Admin login required" in json.dumps(payload, ensure_ascii=False), api_name
        assert (kb / "faq.json").read_text(encoding="utf-8") == before
        admin = open_knowledge_tab(browser, app)
        open_tab(admin, "待解决问题 / Unanswered")
        admin.locator("#kb-inbox-table").get_by_text(OFF_TOPIC).wait_for(timeout=30000)  # not dismissed
    finally:
        app.stop()
    app = App(app_config, offline_env())  # no admin credentials: no admin tabs, no admin endpoints
    try:
        page = open_page(browser, app.url)
        assert "对话 / Chat" in tab_names(page) and not set(ADMIN_TABS) & set(tab_names(page))
        with pytest.raises(httpx.HTTPStatusError):  # no such endpoint
            call(app.url, "save_entry", ["faq.json", "", "坏条目", "不该保存", "", None, "", False, "", ""])
    finally:
        app.stop()


def test_an_admin_in_a_narrow_window_opens_the_tabs_the_bar_has_no_room_for(browser, app_config):
    app = App(app_config, dict(offline_env(), **ADMIN_ENV))
    try:
        page = open_as_admin(browser.new_page(viewport={"width": 1000, "height": 900}, locale="zh-CN"), app)
        # Gradio's "⋯" menu holds what does not fit, once the admin tabs are shown (by the page's load event)
        page.locator(".overflow-dropdown button", has_text="测试集 / Test sets").wait_for(
            state="attached", timeout=30000
        )
        assert set(ADMIN_TABS) < set(tab_names(page))
        assert not page.get_by_role("tab", name="测试集 / Test sets").is_visible()
        open_tab(page, "测试集 / Test sets")
        page.locator("#kb-ts-save").wait_for(timeout=30000)
        shot(page, "admin-narrow-test-sets")
    finally:
        app.stop()
