"""The knowledge loop in Chromium: a clarify pick in the chat becomes a suggested phrasing an admin
accepts in the Unanswered tab, and a test set uploaded and run in the Test sets tab shows its numbers."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.support.browser import ADMIN_ENV, App, ask, offline_env, open_knowledge_tab, open_tab, shot
from tests.support.knowledge import write_knowledge

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.e2e]

SONGS = {
    "anthem": {"query": "中大的校歌是什么？", "document": "校歌是《中山大学校歌》。", "metadata": "校歌"},
    "second": {"query": "中大的第二校歌是什么？", "document": "第二校歌是《紫荆花开》。", "metadata": "校歌"},
}


def test_a_clarify_pick_is_suggested_accepted_and_a_test_set_runs(browser, app_config, tmp_path):
    raw = yaml.safe_load(app_config.read_text(encoding="utf-8"))
    knowledge = Path(raw["knowledge"]["path"])
    write_knowledge(knowledge, SONGS, name="songs.json")
    # settle off: the shipped settle would answer the first song, which "校歌是什么" says more of
    raw["retrieval"]["thresholds"]["sparse"] = {
        "answer": 0.5,
        "direct": None,
        "clarify": 0.05,
        "confirm": None,
        "settle": None,
    }
    app_config.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    app = App(app_config, dict(offline_env(), **ADMIN_ENV))
    try:
        page = open_knowledge_tab(browser, app)
        open_tab(page, "对话 / Chat")
        ask(page, "校歌是什么")
        options = page.locator("#kb-chat button.option")
        options.first.wait_for(timeout=30000)
        options.get_by_text("中大的第二校歌是什么？", exact=True).click()
        page.locator("#kb-chat .bot").last.get_by_text("紫荆花开").wait_for(timeout=30000)

        open_tab(page, "待解决问题 / Unanswered")
        page.get_by_text("建议的问法 / Suggested phrasings").click()
        table = page.locator("#kb-suggestions-table")
        table.get_by_text("校歌是什么", exact=True).wait_for(timeout=30000)
        assert "中大的第二校歌是什么？" in table.inner_text()
        shot(page, "suggested-phrasings")
        page.locator("#kb-suggestions-accept").click()
        page.locator("#kb-suggestions-status").get_by_text("index updated").wait_for(timeout=30000)
        assert (
            "校歌是什么"
            in yaml.safe_load((knowledge / "songs.json").read_text(encoding="utf-8"))["second"]["questions"]
        )

        cases = tmp_path / "songs.csv"
        cases.write_text("question,expected\n第二校歌是什么,songs:second\n火星上有几座城市,none\n", encoding="utf-8")
        open_tab(page, "测试集 / Test sets")
        page.locator("#kb-ts-file input[type=file]").set_input_files(str(cases))
        page.locator("#kb-ts-name textarea, #kb-ts-name input").first.fill("songs")
        page.locator("#kb-ts-save").click()
        page.locator("#kb-ts-saved").get_by_text("2 questions").wait_for(timeout=30000)
        page.locator("#kb-ts-run").click()
        page.locator("#kb-ts-result").get_by_text("recall@1").wait_for(timeout=60000)
        assert "wrong / 100" in page.locator("#kb-ts-result").inner_text()
        shot(page, "test-sets")
    finally:
        app.stop()


def test_the_admin_login_page_is_styled_on_desktop_and_phone(browser, app_config):
    app = App(app_config, dict(offline_env(), **ADMIN_ENV))
    try:
        for width, height, name in ((1400, 1000, "admin-login"), (390, 844, "admin-login-390px")):
            page = browser.new_page(viewport={"width": width, "height": height}, locale="zh-CN")
            page.goto(app.url + "admin/login", wait_until="domcontentloaded")
            button = page.locator("#kb-admin-submit")
            assert button.evaluate("el => getComputedStyle(el).backgroundColor") == "rgb(249, 115, 22)"
            card = page.locator("main").bounding_box()
            assert card is not None and card["width"] <= min(width, 440) and card["x"] >= 0
            shot(page, name)
            page.close()
    finally:
        app.stop()
