"""The four browser scenarios in headless Debian Chromium via Playwright, against `python app.py` in a subprocess.

Screenshots go to test-artifacts/screenshots/. Skipped, with the reason shown, where Chromium is missing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from tests.support.browser import (
    ADMIN_ENV,
    App,
    ask,
    llm_app,
    offline_env,
    open_knowledge_tab,
    open_page,
    open_tab,
    shot,
    wait_answered,
)
from tests.support.knowledge import ROOT
from tests.support.ports import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.slow]


def test_chat_answers_a_chinese_question_with_its_source(browser, app_config):
    app = App(app_config, offline_env())
    try:
        page = open_page(browser, app.url)
        assert "Retrieval-only" in page.locator("#kb-header").inner_text()
        ask(page, "怎么添加知识？")
        chat = page.locator("#kb-chat").inner_text()
        assert "knowledge 文件夹" in chat and "仅检索模式" in chat
        sources = page.locator("#kb-sources").inner_text()
        assert "怎么添加知识？" in sources and "sparse ≥ 0.5" in sources
        assert "相关度 / Relevance" in sources and "1.000" in sources and "覆盖 coverage 1" in sources
        shot(page, "chat")
    finally:
        app.stop()


def test_follow_up_uses_history_and_shows_rewritten_question(browser, app_config, llm_server):
    llm_server.reply = lambda body: (
        "食堂在哪里？" if "Standalone question:" in body["messages"][-1]["content"] else "学生食堂位于校园东区 [1]。"
    )
    app = llm_app(app_config, llm_server.url)
    try:
        page = open_page(browser, app.url)
        ask(page, "图书馆开放时间")
        ask(page, "那吃饭的地方呢？")
        sources = page.locator("#kb-sources").inner_text()
        assert "Searched as: 食堂在哪里？" in sources and "食堂在哪里？" in sources
        assert "学生食堂位于校园东区" in page.locator("#kb-chat").inner_text()
        rewrite = [r for r in llm_server.requests if "Standalone question:" in r["body"]["messages"][-1]["content"]]
        assert "图书馆开放时间" in rewrite[-1]["body"]["messages"][-1]["content"]
        shot(page, "chat-follow-up")
    finally:
        app.stop()


def test_the_next_question_typed_while_an_answer_streams_stays_in_the_box(browser, app_config, llm_server):
    llm_server.reply = lambda body: "学生食堂位于校园东区，早上六点半开门，晚上九点关门，节假日照常营业。[1]"
    llm_server.piece_size = 2
    llm_server.chunk_delay = 0.25  # about 5 s of streaming
    app = llm_app(app_config, llm_server.url, timeout=30)
    try:
        page = open_page(browser, app.url)
        box = page.locator("#kb-input textarea")
        box.fill("食堂在哪里？")
        box.press("Enter")
        page.locator("#kb-chat .bot").last.get_by_text("学生食堂").wait_for(timeout=30000)  # streaming has begun
        box.fill("图书馆几点开门")
        wait_answered(page, "食堂在哪里？")
        assert "节假日照常营业" in page.locator("#kb-chat .bot").last.inner_text()
        assert box.input_value() == "图书馆几点开门"
    finally:
        app.stop()


def test_knowledge_tab_entry_is_answered_and_survives_restart(browser, app_config):
    kb = Path(yaml.safe_load(app_config.read_text(encoding="utf-8"))["knowledge"]["path"])
    app = App(app_config, dict(offline_env(), **ADMIN_ENV))  # the knowledge tab is for admins only
    try:
        page = open_knowledge_tab(browser, app)
        file_input = page.locator("#kb-k-file input")
        file_input.click()
        page.get_by_role("option", name="faq.json").click()
        page.locator("#kb-k-query textarea").fill("停车场怎么收费？")
        page.locator("#kb-k-document textarea").fill("校内停车每小时五元。")
        page.locator("#kb-k-metadata textarea").fill("停车,收费")
        page.locator("#kb-k-save").click()
        page.locator("#kb-k-status").get_by_text("index updated").wait_for(timeout=30000)
        shot(page, "knowledge")
        open_tab(page, "对话 / Chat")
        ask(page, "停车场怎么收费")
        assert "每小时五元" in page.locator("#kb-chat").inner_text()
    finally:
        app.stop()
    saved = json.loads((kb / "faq.json").read_text(encoding="utf-8"))
    assert any(v.get("query") == "停车场怎么收费？" for v in saved.values())
    app = App(app_config, offline_env())
    try:
        page = open_page(browser, app.url)
        ask(page, "停车场怎么收费")
        assert "每小时五元" in page.locator("#kb-chat").inner_text()
    finally:
        app.stop()


def test_retrieval_test_tab_shows_every_mode(browser, app_config):
    app = App(app_config, offline_env())
    try:
        page = open_page(browser, app.url)
        open_tab(page, "检索测试 / Retrieval test")
        box = page.locator("#kb-rt-query textarea")
        box.fill("图书馆几点开放")
        box.press("Enter")
        page.locator("#kb-rt-results").get_by_text("faq:library").first.wait_for(timeout=60000)
        text = page.locator("#kb-rt-results").inner_text()
        assert "sparse" in text and "✓" in text
        shot(page, "retrieval-test")
    finally:
        app.stop()


def test_chat_through_elasticsearch_backend(browser, app_config):
    from tests.support.es_server import shared_server

    url = shared_server().url  # skips when osmem-server is not installed
    raw = yaml.safe_load(app_config.read_text(encoding="utf-8"))
    raw["retrieval"]["sparse"].update(
        backend="elasticsearch",
        elasticsearch={"hosts": [url], "index": f"kbbot-browser-{free_port()}", "compat_headers": False},
    )
    app_config.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    app = App(app_config, offline_env())
    try:
        page = open_page(browser, app.url)
        ask(page, "怎么添加知识？")
        assert "knowledge 文件夹" in page.locator("#kb-chat").inner_text()
        sources = page.locator("#kb-sources").inner_text()
        # The same sparse threshold as tantivy's: both compute coverage.
        assert "elasticsearch" in sources and "sparse ≥ 0.5" in sources and "覆盖 coverage 1" in sources
        shot(page, "chat-elasticsearch")
    finally:
        app.stop()


def test_knowledge_tab_adds_two_entries_in_a_row_and_delete_asks_first(browser, app_config):
    kb = Path(yaml.safe_load(app_config.read_text(encoding="utf-8"))["knowledge"]["path"])
    app = App(app_config, dict(offline_env(), **ADMIN_ENV))
    try:
        page = open_knowledge_tab(browser, app)
        page.locator("#kb-k-file input").click()
        page.get_by_role("option", name="faq.json").click()
        for n, (q, d) in enumerate(
            [("停车场怎么收费？", "校内停车每小时五元。"), ("自行车停哪里？", "自行车停在车棚。")], 1
        ):
            page.locator("#kb-k-query textarea").fill(q)
            page.locator("#kb-k-document textarea").fill(d)
            page.locator("#kb-k-save").click()
            page.locator("#kb-k-status").get_by_text(f"Added faq:{n}").wait_for(timeout=30000)
            page.wait_for_function("() => document.querySelector('#kb-k-query textarea').value === ''", timeout=30000)
            assert "New entry" in page.locator("#kb-k-mode").inner_text()
        saved = json.loads((kb / "faq.json").read_text(encoding="utf-8"))
        assert saved["1"]["query"] == "停车场怎么收费？" and saved["2"]["query"] == "自行车停哪里？"
        page.locator("#kb-k-key input").click()
        page.get_by_role("option", name="1", exact=True).click()
        page.wait_for_function(
            "() => document.querySelector('#kb-k-query textarea').value === '停车场怎么收费？'", timeout=30000
        )
        assert "Editing faq.json · 1" in page.locator("#kb-k-mode").inner_text()
        page.locator("#kb-k-delete").click()
        page.locator("#kb-k-delete-confirm").wait_for(state="visible", timeout=30000)
        assert "1" in json.loads((kb / "faq.json").read_text(encoding="utf-8"))  # nothing deleted yet
        shot(page, "knowledge-delete-confirm")
        page.locator("#kb-k-delete-confirm").click()
        page.locator("#kb-k-status").get_by_text("Deleted faq:1").wait_for(timeout=30000)
        saved = json.loads((kb / "faq.json").read_text(encoding="utf-8"))
        assert "1" not in saved and saved["2"]["query"] == "自行车停哪里？"
    finally:
        app.stop()


SYSU = ROOT.parent / "shared" / "data" / "sysu" / "database.json"


def test_entry_browser_finds_and_loads_a_sysu_entry(browser, app_config):
    if not SYSU.is_file():
        pytest.skip(f"the sysu knowledge is not at {SYSU}")
    kb = Path(yaml.safe_load(app_config.read_text(encoding="utf-8"))["knowledge"]["path"])
    (kb / "sysu.json").write_bytes(SYSU.read_bytes())  # into the test's temp folder only
    app = App(app_config, dict(offline_env(), **ADMIN_ENV))
    try:
        page = open_knowledge_tab(browser, app)
        table = page.locator("#kb-eb-table")
        cells = table.locator("[role=gridcell]:visible")  # the shown rows (the table keeps hidden sizing copies)
        cells.first.wait_for(timeout=30000)
        box = page.locator("#kb-eb-search textarea, #kb-eb-search input").first
        box.fill("校训")
        box.press("Enter")
        page.locator("#kb-eb-info").get_by_text("校训").wait_for(timeout=30000)
        # Entry 140's document starts with 校训 (entry 17, "中山大学的校训", has it only in query and keywords).
        cell = cells.filter(has_text=re.compile(r"^\s*中山大学校校训\s*$")).first
        cell.wait_for(timeout=30000)
        shown = " ".join(cells.all_inner_texts())
        assert "faq.json" not in shown and "sysu.json" in shown
        shot(page, "knowledge-entry-browser")
        cell.click()
        page.wait_for_function(
            "() => document.querySelector('#kb-k-query textarea').value === '中山大学校校训'", timeout=30000
        )
        assert "校训" in page.locator("#kb-k-document textarea").input_value()
        assert "Editing sysu.json · 140" in page.locator("#kb-k-mode").inner_text()
    finally:
        app.stop()
