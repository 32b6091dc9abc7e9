"""Restore in the page, in headless Chromium against `python app.py`: an admin adds an entry, lists
the file's kept versions and restores the one before, byte for byte; desktop and phone screenshots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.support.browser import ADMIN_ENV, App, offline_env, open_knowledge_tab, open_tab, shot

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.e2e]


def test_an_admin_restores_the_version_before_a_save_in_the_page(browser, app_config):
    kb = Path(yaml.safe_load(app_config.read_text(encoding="utf-8"))["knowledge"]["path"])
    original = (kb / "faq.json").read_bytes()
    app = App(app_config, dict(offline_env(), **ADMIN_ENV))
    try:
        page = open_knowledge_tab(browser, app)
        page.locator("#kb-k-file input").click()
        page.get_by_role("option", name="faq.json").click()  # the file list came with the admin's page load
        page.locator("#kb-k-query textarea").fill("停车场怎么收费？")
        page.locator("#kb-k-document textarea").fill("校内停车每小时五元。")
        page.locator("#kb-k-save").click()
        page.locator("#kb-k-status").get_by_text("Added").wait_for(timeout=30000)
        assert (kb / "faq.json").read_bytes() != original
        page.get_by_text("历史版本与恢复 / Earlier versions and restore").click()
        page.locator("#kb-k-history").click()
        page.locator("#kb-k-version input").click()
        page.get_by_role("option").filter(has_text="bytes").first.click()
        shot(page, "knowledge-restore")
        page.locator("#kb-k-restore").click()
        page.locator("#kb-k-status").get_by_text("Restored faq.json").wait_for(timeout=30000)
        assert (kb / "faq.json").read_bytes() == original
        assert "停车场" not in json.dumps(json.loads(original), ensure_ascii=False)
        phone = browser.new_page(viewport={"width": 390, "height": 844}, locale="zh-CN", storage_state=None)
        phone.context.add_cookies(page.context.cookies())
        phone.goto(app.url, wait_until="domcontentloaded")
        open_tab(phone, "知识管理 / Knowledge")
        phone.get_by_text("历史版本与恢复 / Earlier versions and restore").click()
        phone.locator("#kb-k-history").click()
        phone.locator("#kb-k-version input").wait_for(timeout=30000)
        shot(phone, "knowledge-restore-phone")
    finally:
        app.stop()
