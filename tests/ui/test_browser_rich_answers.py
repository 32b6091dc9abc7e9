"""A picture answer in headless Chromium, on the page and in the widget, at desktop and phone widths: the shipped
example entry's campus map is loaded from this app's /kb-assets/, fits the chat, and its links open a new tab; a
remote picture and a script in a document show as text. Screenshots in test-artifacts/screenshots/."""

from __future__ import annotations

import json
import shutil

import pytest

from bot.config.variants import replace, update
from tests.support.browser import ROOT, ask, shot
from tests.support.host_page import HostPage
from tests.support.knowledge import TINY, write_knowledge

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.e2e]

WIDGET_TOKEN = "widget-token-for-rich-answers"
QUESTION = "怎么在回答里放图片？"
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 1000}
UNSAFE = {
    "unsafe": {
        "query": "危险的内容测试？",
        "document": "看这里 ![跟踪](http://198.51.100.7/t.png) <img src=x onerror=alert(1)> [点我](javascript:alert(1))"
        " [官网](https://example.org/) [地图原图](assets/campus-map.png)",
    }
}


@pytest.fixture
def rich_settings(settings, tmp_path):
    """The tiny knowledge, the shipped example entry with its map, and a document with unsafe markup."""
    shipped = json.loads((ROOT / "knowledge" / "kbbot_guide_zh.json").read_text(encoding="utf-8"))
    folder = tmp_path / "rich"
    write_knowledge(folder, {**TINY, "rich_answers": shipped["rich_answers"], **UNSAFE})
    (folder / "assets").mkdir()
    shutil.copy(ROOT / "knowledge" / "assets" / "campus-map.png", folder / "assets" / "campus-map.png")
    return replace(settings, "knowledge.path", str(folder))


def loaded_picture(scope) -> dict:
    """The first answer picture's source, natural width and shown width (0 when it did not load)."""
    return scope.evaluate(
        "img => ({src: img.getAttribute('src'), natural: img.naturalWidth, shown: img.getBoundingClientRect().width})"
    )


@pytest.mark.parametrize("size, name", [(DESKTOP, "rich-answer"), (PHONE, "rich-answer-390px")])
def test_the_page_shows_the_map_and_opens_links_in_a_new_tab(browser, rich_settings, serve_api, size, name):
    base = serve_api(rich_settings).removesuffix("/v1")
    page = browser.new_page(viewport=size, locale="zh-CN")
    page.goto(base + "/", wait_until="domcontentloaded")
    page.locator("#kb-input textarea").wait_for(timeout=30000)
    ask(page, QUESTION)
    picture = page.locator("#kb-chat .kb-rich img").first
    picture.wait_for(timeout=30000)
    page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=picture.element_handle(), timeout=30000)
    seen = loaded_picture(picture)
    assert seen["src"] == "/kb-assets/campus-map.png" and seen["natural"] == 480
    assert 0 < seen["shown"] <= size["width"]  # fits the chat on a phone too
    shot(page, name)

    ask(page, "危险的内容测试？")
    answer = page.locator("#kb-chat .kb-rich").last
    assert "跟踪" in answer.inner_text() and "<img src=x" in answer.inner_text()
    assert answer.locator("img").count() == 0 and answer.locator("a[href^='javascript']").count() == 0
    links = answer.locator("a")
    assert [links.nth(i).get_attribute("href") for i in range(links.count())] == [
        "https://example.org/",
        "/kb-assets/campus-map.png",
    ]
    for i in range(links.count()):
        assert links.nth(i).get_attribute("target") == "_blank" and "noopener" in links.nth(i).get_attribute("rel")
    assert page.evaluate("() => window.__xss === undefined")


@pytest.mark.parametrize("size, name", [(DESKTOP, "rich-widget"), (PHONE, "rich-widget-390px")])
def test_the_widget_on_another_site_shows_the_map_from_the_app(
    browser, rich_settings, serve_api, monkeypatch, size, name
):
    host = HostPage(WIDGET_TOKEN)
    try:
        monkeypatch.setenv(rich_settings.widget.token_env, WIDGET_TOKEN)
        settings = update(rich_settings, {"widget.enabled": True, "widget.allowed_origins": [host.origin]})
        host.app_url = base = serve_api(settings).removesuffix("/v1")
        page = browser.new_page(viewport=size, locale="zh-CN")
        page.goto(host.origin, wait_until="domcontentloaded")
        page.locator("#kbbot-widget .bubble").click()
        page.locator("#kbbot-widget input").fill(QUESTION)
        page.locator("#kbbot-widget input").press("Enter")
        picture = page.locator("#kbbot-widget .msg.rich img").first
        picture.wait_for(timeout=30000)
        page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=picture.element_handle())
        seen = loaded_picture(picture)
        assert seen["src"] == f"{base}/kb-assets/campus-map.png" and seen["natural"] == 480
        assert 0 < seen["shown"] <= size["width"]
        shot(page, name)

        page.locator("#kbbot-widget input").fill("危险的内容测试？")
        page.locator("#kbbot-widget input").press("Enter")
        page.locator("#kbbot-widget .msg.rich", has_text="跟踪").wait_for(timeout=30000)
        unsafe = page.locator("#kbbot-widget .msg.rich").last
        links = unsafe.locator("a")
        assert unsafe.locator("img").count() == 0 and links.count() == 2
        assert links.nth(1).get_attribute("href") == f"{base}/kb-assets/campus-map.png"
        assert all(links.nth(i).get_attribute("target") == "_blank" for i in range(2))
    finally:
        host.close()
