"""Type-ahead in headless Chromium against `python app.py`: typing Chinese in the page and in the widget (embedded by
a page on another origin) offers the knowledge's questions below the input, as text, within the category filter,
on desktop and phone widths; a click asks the question."""

from __future__ import annotations

import pytest
import yaml

from tests.support.browser import App, offline_env, open_page, shot
from tests.support.host_page import HostPage
from tests.support.knowledge import TINY, config_dict, write_knowledge

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.e2e]

WIDGET_TOKEN = "widget-token-for-typeahead"
HTML_QUESTION = "<img src=x onerror=window.__pwned=1> 发票怎么报销"
KNOWLEDGE = {
    **TINY,
    "invoice": {"query": HTML_QUESTION, "document": "把发票交到财务处。", "categories": ["财务"]},
    "dorm": {"query": "宿舍怎么报修", "document": "拨打后勤电话 8888。", "categories": ["住宿"]},
    "draft": {"query": "怎么申请调换宿舍", "document": "…", "draft": True},
}
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(the app, the host page embedding its widget), the app over :data:`KNOWLEDGE`."""
    tmp = tmp_path_factory.mktemp("typeahead")
    host = HostPage(WIDGET_TOKEN)
    write_knowledge(tmp / "knowledge", KNOWLEDGE)
    raw = config_dict(tmp, tmp / "knowledge", sparse=0.3)
    raw["widget"].update({"enabled": True, "allowed_origins": [host.origin]})
    config = tmp / "config.yaml"
    config.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    app = App(config, {**offline_env(), "KBBOT_WIDGET_TOKEN": WIDGET_TOKEN})
    host.app_url = app.url.rstrip("/")
    try:
        yield app, host
    finally:
        app.stop()
        host.close()


def offered(page, selector: str) -> list[str]:
    return [t.strip() for t in page.locator(selector).all_inner_texts()]


def type_in_page(page, text: str) -> None:
    box = page.locator("#kb-input textarea")
    box.fill("")
    box.press_sequentially(text, delay=60)  # as an input method would: no key presses Gradio counts as input


PAGE_ITEMS = "#kb-typeahead button"


def test_typing_in_the_page_offers_questions_as_text_and_a_click_asks(browser, served):
    app, _ = served
    page = open_page(browser, app.url)
    type_in_page(page, "怎么")
    page.locator(PAGE_ITEMS).first.wait_for(timeout=30000)
    # starting with 怎么 first, the shorter first, then containing it; the draft never
    assert offered(page, PAGE_ITEMS) == ["怎么添加知识？", "怎么切换检索模式？", "宿舍怎么报修", HTML_QUESTION]
    assert page.locator("#kb-typeahead img").count() == 0 and page.evaluate("window.__pwned") is None
    # just below the input, above the buttons
    box = page.locator("#kb-input").bounding_box()
    listed = page.locator("#kb-typeahead").bounding_box()
    send = page.locator("#kb-send").bounding_box()
    assert box and listed and send and box["y"] < listed["y"] < send["y"]
    shot(page, "typeahead-page")

    type_in_page(page, "怎")
    page.locator("#kb-typeahead").wait_for(state="hidden", timeout=30000)  # one character: nothing offered

    page.locator("#kb-categories input").click()
    page.get_by_role("option", name="住宿", exact=True).click()
    page.keyboard.press("Escape")
    type_in_page(page, "怎么")
    page.wait_for_function(
        "() => [...document.querySelectorAll('#kb-typeahead button')].map(b => b.innerText.trim()).join('|')"
        " === '宿舍怎么报修'",
        timeout=30000,
    )
    page.locator(PAGE_ITEMS).first.click()
    page.locator("#kb-chat").get_by_text("拨打后勤电话 8888").wait_for(timeout=30000)
    page.locator("#kb-typeahead").wait_for(state="hidden", timeout=30000)
    assert page.locator("#kb-input textarea").input_value() == ""
    shot(page, "typeahead-page-asked")


def test_the_page_offers_questions_on_a_phone(browser, served):
    app, _ = served
    page = browser.new_page(viewport=PHONE, locale="zh-CN", is_mobile=True, has_touch=True)
    page.goto(app.url, wait_until="domcontentloaded")
    page.locator("#kb-input textarea").wait_for(timeout=30000)
    type_in_page(page, "发票")
    page.locator(PAGE_ITEMS).first.wait_for(timeout=30000)
    assert offered(page, PAGE_ITEMS) == [HTML_QUESTION]
    item = page.locator(PAGE_ITEMS).first.bounding_box()
    assert item and item["x"] >= 0 and item["x"] + item["width"] <= PHONE["width"]
    page.locator("#kb-typeahead").scroll_into_view_if_needed()
    shot(page, "typeahead-page-phone")
    page.locator(PAGE_ITEMS).first.tap()
    page.locator("#kb-chat").get_by_text("把发票交到财务处").wait_for(timeout=30000)


WIDGET_ITEMS = "#kbbot-widget .suggest button"


@pytest.mark.parametrize("viewport", [{"width": 1200, "height": 800}, PHONE], ids=["desktop", "phone"])
def test_typing_in_the_widget_offers_questions_and_a_click_asks(browser, served, viewport):
    _, host = served
    page = browser.new_page(viewport=viewport, locale="zh-CN")
    page.goto(host.origin, wait_until="domcontentloaded")
    page.locator("#kbbot-widget .bubble").click()
    page.locator("#kbbot-widget input").press_sequentially("怎么", delay=60)
    page.locator(WIDGET_ITEMS).first.wait_for(timeout=30000)
    assert offered(page, WIDGET_ITEMS) == ["怎么添加知识？", "怎么切换检索模式？", "宿舍怎么报修", HTML_QUESTION]
    assert page.evaluate("window.__pwned") is None
    assert (
        page.evaluate(
            "() => document.querySelector('#kbbot-widget').shadowRoot.querySelectorAll('.suggest img').length"
        )
        == 0
    )
    # under the input, inside the panel and the screen
    field = page.locator("#kbbot-widget input").bounding_box()
    item = page.locator(WIDGET_ITEMS).first.bounding_box()
    assert field and item and item["y"] >= field["y"] + field["height"] - 1
    assert item["x"] >= 0 and item["x"] + item["width"] <= viewport["width"]
    name = "typeahead-widget" + ("-phone" if viewport is PHONE else "")
    shot(page, name)
    page.locator(WIDGET_ITEMS).nth(2).click()
    page.locator("#kbbot-widget .msg.bot", has_text="拨打后勤电话 8888").wait_for(timeout=30000)
    assert page.locator(WIDGET_ITEMS).count() == 0 or not page.locator("#kbbot-widget .suggest").is_visible()
    shot(page, name + "-asked")
