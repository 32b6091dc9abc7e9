"""The welcome card and related questions in headless Chromium, on the page and in the widget embedded by another
origin, at desktop and phone widths: the card shows what visitors asked, a click asks it, the answer offers
related questions to click; the widget's 👎 with a fixed reason and "was this solved?" are stored in the log."""

from __future__ import annotations

import pytest

from bot.conversations.turn_log import turn_log_from_settings
from bot.texts import THANKS
from tests.support.browser import shot
from tests.support.host_page import HostPage
from tests.support.knowledge import TINY, write_knowledge
from tests.support.serving import serve_asked

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.e2e]

WIDGET_TOKEN = "widget-token-for-browser-tests"
KNOWLEDGE = {**TINY, "library": {**TINY["library"], "related": ["canteen", "add"]}}
SIZES = {"desktop": {"width": 1280, "height": 900}, "phone": {"width": 390, "height": 844}}


@pytest.fixture
def app(settings, kb_dir, monkeypatch):
    """(base URL, host page, settings): visitors asked for the library three times before the app started."""
    host = HostPage(WIDGET_TOKEN)
    write_knowledge(kb_dir, KNOWLEDGE)
    monkeypatch.setenv(settings.widget.token_env, WIDGET_TOKEN)
    page, url = serve_asked(settings, host.origin, "图书馆几点开放？", pinned=["怎么添加知识？"])
    host.app_url = url
    try:
        yield url, host, settings
    finally:
        page.close()
        host.close()


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_the_page_s_welcome_card_and_related_questions(browser, app, size):
    url, _, _ = app
    page = browser.new_page(viewport=SIZES[size], locale="zh-CN", is_mobile=size == "phone")
    page.goto(f"{url}/", wait_until="domcontentloaded")
    page.locator("#kb-input textarea").wait_for(timeout=30000)
    card = page.locator("#kb-examples")
    card.get_by_text("图书馆几点开放？").wait_for(timeout=30000)
    page.locator("#kb-header", has_text="已加载").wait_for(timeout=30000)
    assert card.inner_text().index("怎么添加知识？") < card.inner_text().index("图书馆几点开放？")  # pinned first
    assert "图书馆开放时间" not in card.inner_text()  # as visitors ask it, not the entry's title
    shot(page, f"welcome-page-{size}")
    card.get_by_text("图书馆几点开放？").click()  # a click asks it
    page.wait_for_function(
        "() => document.querySelector('#kb-sources .kb-sources')?.dataset.q === '图书馆几点开放？'", timeout=30000
    )
    assert "八点到晚上十点" in page.locator("#kb-chat .bot").last.inner_text()
    related = page.locator("#kb-chat button", has_text="💡")
    related.first.wait_for(timeout=30000)
    labels = [related.nth(i).inner_text() for i in range(related.count())]
    assert labels[:2] == ["💡 食堂在哪里？", "💡 怎么添加知识？"] and len(labels) <= 3
    shot(page, f"related-page-{size}")
    related.first.click()
    page.wait_for_function(
        "() => document.querySelector('#kb-sources .kb-sources')?.dataset.q === '食堂在哪里？'", timeout=30000
    )
    assert "东区" in page.locator("#kb-chat .bot").last.inner_text()


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_the_widget_s_welcome_card_related_questions_and_feedback(browser, app, size):
    _, host, settings = app
    # not is_mobile: the host page has no viewport meta tag, so a phone would lay it out 980 px wide
    page = browser.new_page(viewport=SIZES[size], locale="zh-CN")
    page.goto(host.origin, wait_until="domcontentloaded")
    page.locator("#kbbot-widget .bubble").click()
    welcome = page.locator("#kbbot-widget .welcome")
    welcome.get_by_text("图书馆几点开放？").wait_for(timeout=30000)
    assert welcome.locator("button").first.inner_text() == "怎么添加知识？"
    shot(page, f"welcome-widget-{size}")
    welcome.get_by_text("图书馆几点开放？").click()
    page.locator("#kbbot-widget .msg.bot", has_text="八点到晚上十点").wait_for(timeout=30000)
    related = page.locator("#kbbot-widget .questions.related button")
    assert [related.nth(i).inner_text() for i in range(related.count())][:2] == ["食堂在哪里？", "怎么添加知识？"]
    page.locator("#kbbot-widget .rate .down").last.click()
    page.locator("#kbbot-widget .rate .reason", has_text="内容过时").click()
    page.locator("#kbbot-widget .rate input").fill("周末不开")
    shot(page, f"related-widget-{size}")
    page.locator("#kbbot-widget .rate .send-reason").click()
    page.locator("#kbbot-widget .rate", has_text=THANKS).wait_for(timeout=30000)
    page.locator("#kbbot-widget .solved .no").click()
    page.locator("#kbbot-widget .solved", has_text=THANKS).wait_for(timeout=30000)
    shot(page, f"feedback-widget-{size}")
    log = turn_log_from_settings(settings)
    assert log is not None
    try:
        (turn,) = [t for t in log.recent(20) if t["source"] == "widget"]
        assert (turn["question"], turn["rating"], turn["reason"]) == ("图书馆几点开放？", -1, "未解决 / Not solved")
    finally:
        log.close()
    related.first.click()  # a related question is asked like a typed one
    page.locator("#kbbot-widget .msg.bot", has_text="东区").wait_for(timeout=30000)
