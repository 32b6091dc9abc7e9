"""The chat widget in headless Chromium, embedded by a page on a second local origin (another port): the bubble
opens, a question is answered, clarify options are buttons and a click answers; a page on a foreign origin gets
the refusal. Fixtures as in test_browser."""

from __future__ import annotations

import pytest

from bot.config.variants import replace, update
from bot.texts import FOREIGN
from tests.support.browser import shot
from tests.support.host_page import HostPage
from tests.support.knowledge import FEES, with_thresholds, write_knowledge

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.e2e]

WIDGET_TOKEN = "widget-token-for-browser-tests"


def ask(page, text: str) -> None:
    before = page.locator("#kbbot-widget .msg").count()
    page.locator("#kbbot-widget input").fill(text)
    page.locator("#kbbot-widget input").press("Enter")
    page.wait_for_function(
        "n => document.querySelector('#kbbot-widget').shadowRoot.querySelectorAll('.msg').length >= n + 2",
        arg=before,
        timeout=30000,
    )


def test_the_widget_on_another_origin_answers_and_clarifies(browser, settings, serve_api, monkeypatch, tmp_path):
    allowed, foreign = HostPage(WIDGET_TOKEN), HostPage(WIDGET_TOKEN)
    try:
        write_knowledge(tmp_path / "fees", FEES)
        monkeypatch.setenv(settings.widget.token_env, WIDGET_TOKEN)
        settings = replace(settings, "knowledge.path", str(tmp_path / "fees"))
        settings = update(settings, {"widget.enabled": True, "widget.allowed_origins": [allowed.origin]})
        settings = with_thresholds(
            settings,
            "sparse",
            settings.retrieval.thresholds["sparse"].model_copy(update={"answer": 0.3, "clarify": 0.05}),
        )
        allowed.app_url = foreign.app_url = serve_api(settings).removesuffix("/v1")

        page = browser.new_page(viewport={"width": 1200, "height": 800}, locale="zh-CN")
        page.goto(allowed.origin, wait_until="domcontentloaded")
        page.locator("#kbbot-widget .bubble").click()
        ask(page, "校园网怎么连接？")
        assert "SYSU-WiFi" in page.locator("#kbbot-widget .msg.bot").last.inner_text()
        ask(page, "学费是多少？")
        buttons = page.locator("#kbbot-widget .options button")
        assert buttons.count() == 2 and "研究生学费是多少？" in buttons.nth(1).inner_text()
        shot(page, "widget-clarify")
        buttons.nth(1).click()
        page.locator("#kbbot-widget .msg.bot", has_text="研究生学费每年八千元").wait_for(timeout=30000)
        shot(page, "widget")

        other = browser.new_page(viewport={"width": 1200, "height": 800}, locale="zh-CN")
        other.goto(foreign.origin, wait_until="domcontentloaded")
        other.locator("#kbbot-widget .bubble").click()
        other.locator("#kbbot-widget input").fill("校园网怎么连接？")
        other.locator("#kbbot-widget input").press("Enter")
        other.locator("#kbbot-widget .msg.error").wait_for(timeout=30000)
        assert other.locator("#kbbot-widget .msg.error").inner_text() == FOREIGN
        assert other.locator("#kbbot-widget .msg.bot").count() == 0
    finally:
        allowed.close()
        foreign.close()


def test_a_long_widget_answer_shows_from_its_start_with_related_entries_as_bullets(
    browser, settings, serve_api, monkeypatch, tmp_path
):
    page_host = HostPage(WIDGET_TOKEN)
    try:
        rooms = ("自习室", "阅览室", "讨论室")
        knowledge = {
            room: {
                "query": f"图书馆{room}在哪里？",
                "document": "\n".join(f"第{n}条：图书馆{room}的说明，开放时间和位置。" for n in range(1, 41)),
                "metadata": f"图书馆,{room}",
            }
            for room in rooms
        }
        write_knowledge(tmp_path / "rooms", knowledge)
        monkeypatch.setenv(settings.widget.token_env, WIDGET_TOKEN)
        settings = replace(settings, "knowledge.path", str(tmp_path / "rooms"))
        settings = update(settings, {"widget.enabled": True, "widget.allowed_origins": [page_host.origin]})
        settings = with_thresholds(
            settings,
            "sparse",
            settings.retrieval.thresholds["sparse"].model_copy(
                update={"answer": 0.05, "clarify": None, "unsure": None}
            ),
        )
        page_host.app_url = serve_api(settings).removesuffix("/v1")
        page = browser.new_page(viewport={"width": 1200, "height": 800}, locale="zh-CN")
        page.goto(page_host.origin, wait_until="domcontentloaded")
        page.locator("#kbbot-widget .bubble").click()
        ask(page, "图书馆的自习室、阅览室和讨论室在哪里？")
        page.wait_for_timeout(300)
        reply = page.locator("#kbbot-widget .msg.bot").last
        text = reply.inner_text()
        assert "第40条" in text and "\n第2条" in text  # the document's lines stay lines
        assert reply.locator("li").count() == 2 and "图书馆阅览室在哪里？" in reply.locator("li").first.inner_text()
        assert not any(line.startswith("- ") for line in text.splitlines())  # a list, not its markers as text
        log_box, reply_box = page.locator("#kbbot-widget .log").bounding_box(), reply.bounding_box()
        assert log_box is not None and reply_box is not None and reply_box["height"] > log_box["height"]
        assert log_box["y"] - 1 <= reply_box["y"] <= log_box["y"] + 20, (log_box, reply_box)  # its start in view
        shot(page, "widget-long-answer")
    finally:
        page_host.close()
