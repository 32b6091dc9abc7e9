"""The category selector in headless Chromium against `python app.py`: shown when the knowledge has categories,
the chat and the retrieval test keep to the chosen ones. Fixtures as in test_browser."""

from __future__ import annotations

import pytest
import yaml

from tests.support.browser import App, ask, offline_env, open_page, open_tab, shot
from tests.support.knowledge import OFFICES, config_dict, write_knowledge

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.e2e]


def choose(page, selector: str, category: str) -> None:
    page.locator(f"{selector} input").click()
    page.get_by_role("option", name=category, exact=True).click()
    page.keyboard.press("Escape")


def test_the_category_selector_restricts_the_chat_and_the_retrieval_test(browser, tmp_path):
    write_knowledge(tmp_path / "knowledge", OFFICES)
    raw = config_dict(tmp_path, tmp_path / "knowledge", sparse=0.3)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    app = App(config, offline_env())
    try:
        page = open_page(browser, app.url)
        assert page.locator("#kb-categories").is_visible()
        choose(page, "#kb-categories", "研究生")
        ask(page, "学费是多少？")
        sources = page.locator("#kb-sources").inner_html()
        assert "研究生学费每年八千元" in page.locator("#kb-chat").inner_text()
        assert "faq:graduate_fee" in sources and "faq:undergrad_fee" not in sources
        assert "分类 / Categories:" in page.locator("#kb-sources").inner_text()
        shot(page, "categories-chat")
        open_tab(page, "检索测试 / Retrieval test")
        choose(page, "#kb-rt-categories", "招生")
        box = page.locator("#kb-rt-query textarea")
        box.fill("学费是多少？")
        box.press("Enter")
        page.locator("#kb-rt-results").get_by_text("faq:undergrad_fee").first.wait_for(timeout=60000)
        assert "faq:graduate_fee" not in page.locator("#kb-rt-results").inner_text()
        shot(page, "categories-retrieval-test")
    finally:
        app.stop()


def test_no_selector_without_categories(browser, app_config):
    app = App(app_config, offline_env())
    try:
        page = open_page(browser, app.url)
        ask(page, "怎么添加知识？")
        assert page.locator("#kb-categories").count() == 0 or not page.locator("#kb-categories").is_visible()
    finally:
        app.stop()
