"""Publishing with ``knowledge.require_approval`` in Chromium: an admin alone saves a draft but cannot publish it; a
publisher who logs in at /publisher/login (a wrong password refused) publishes it from the same page."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from bot.handoff.passwords import hash_password
from tests.support.browser import ADMIN_ENV, App, offline_env, open_knowledge_tab, open_tab, shot

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.e2e]

PASSWORD = "pw-of-lin-publisher"


def dorm(knowledge: Path) -> dict:
    return json.loads((knowledge / "faq.json").read_text(encoding="utf-8")).get("dorm", {})


def load_dorm(page) -> None:
    page.locator("#kb-k-key input").fill("dorm")
    page.locator("#kb-k-key input").press("Enter")
    page.locator("#kb-k-mode").get_by_text("dorm").wait_for(timeout=30000)


def test_a_draft_waits_for_a_publisher_logged_in_at_its_own_page(browser, app_config):
    raw = yaml.safe_load(app_config.read_text(encoding="utf-8"))
    raw["knowledge"]["require_approval"] = True
    raw["knowledge"]["publishers"] = [{"name": "lin", "password_hash": hash_password(PASSWORD)}]
    app_config.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    knowledge = Path(raw["knowledge"]["path"])
    app = App(app_config, dict(offline_env(), **ADMIN_ENV))
    try:
        page = open_knowledge_tab(browser, app)
        page.locator("#kb-k-new").click()
        page.locator("#kb-k-key input").fill("dorm")
        page.locator("#kb-k-query textarea, #kb-k-query input").first.fill("宿舍几点熄灯？")
        page.locator("#kb-k-document textarea").fill("宿舍晚上十一点熄灯。")
        page.locator("#kb-k-draft input").check()
        page.locator("#kb-k-save").click()
        status = page.locator("#kb-k-status")
        status.get_by_text("index updated").wait_for(timeout=60000)
        assert dorm(knowledge)["draft"] is True  # an admin alone saves drafts

        load_dorm(page)
        page.locator("#kb-k-publish").click()
        status.get_by_text("发布者登录").wait_for(timeout=30000)
        shot(page, "operating-publisher-needed")
        assert dorm(knowledge)["draft"] is True

        page.goto(app.url + "publisher/login", wait_until="domcontentloaded")
        assert "发布者登录 / Publisher login" in page.content()
        page.locator("#kb-admin-user").fill("lin")
        page.locator("#kb-admin-password").fill("not-the-password")
        page.locator("#kb-admin-submit").click()
        page.locator("#kb-admin-error").wait_for(timeout=30000)
        page.locator("#kb-admin-user").fill("lin")
        page.locator("#kb-admin-password").fill(PASSWORD)
        page.locator("#kb-admin-submit").click()
        page.locator("#kb-input textarea").wait_for(timeout=30000)  # back on the page, still the admin too
        open_tab(page, "知识管理 / Knowledge")
        load_dorm(page)
        page.locator("#kb-k-publish").click()
        status.get_by_text("index updated").wait_for(timeout=60000)
        assert "draft" not in dorm(knowledge)
    finally:
        app.stop()
