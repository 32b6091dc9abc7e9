"""Two knowledge bases in headless Chromium against `python app.py`: the page at /kb/hr/ names hr and answers from
hr's knowledge while / answers from the default's; hr's admin logs in at /kb/hr/admin/login and sees hr's admin
tabs only. Fixtures as in test_browser."""

from __future__ import annotations

import pytest

from tests.support.browser import App, ask, offline_env, open_page, shot
from tests.support.knowledge_bases import HR_ADMIN, QUESTIONS, expected

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.e2e]

KNOWLEDGE_TAB = "知识管理 / Knowledge"


def test_each_knowledge_base_has_its_page_and_its_admin(browser, two_kbs):
    env = {**offline_env(), "KBBOT_ADMIN_USER_HR": HR_ADMIN[0], "KBBOT_ADMIN_PASSWORD_HR": HR_ADMIN[1]}
    app = App(two_kbs(), env)
    try:
        hr = open_page(browser, app.url + "kb/hr/")
        assert "人事处 HR" in hr.locator("#kb-header").inner_text()
        ask(hr, QUESTIONS[0])
        chat = hr.locator("#kb-chat").inner_text()
        assert expected("hr", QUESTIONS[0]) in chat and expected("default", QUESTIONS[0]) not in chat
        shot(hr, "knowledge-bases-hr-page")
        default = open_page(browser, app.url)
        ask(default, QUESTIONS[0])
        assert expected("default", QUESTIONS[0]) in default.locator("#kb-chat").inner_text()
        hr.goto(app.url + "kb/hr/admin/login", wait_until="domcontentloaded")
        hr.locator("#kb-admin-user").fill(HR_ADMIN[0])
        hr.locator("#kb-admin-password").fill(HR_ADMIN[1])
        hr.locator("#kb-admin-submit").click()
        hr.locator("#kb-input textarea").wait_for(timeout=30000)
        assert hr.url == app.url + "kb/hr/"
        hr.get_by_role("tab", name=KNOWLEDGE_TAB).wait_for(timeout=30000)
        shot(hr, "knowledge-bases-hr-admin")
        hr.goto(app.url, wait_until="domcontentloaded")  # the same browser, hr's cookie: not the default's admin
        hr.locator("#kb-input textarea").wait_for(timeout=30000)
        hr.wait_for_timeout(1500)  # the admin view is applied by the page's load event
        assert not hr.get_by_role("tab", name=KNOWLEDGE_TAB).is_visible()
    finally:
        app.stop()
