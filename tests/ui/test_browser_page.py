"""What the page shows, in headless Chromium against `python app.py`: the mode that answered, split answers,
clickable suggestions, examples from the knowledge in use, and the phone layout. Fixtures as in test_browser."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import yaml

from bot.texts import DOWN_REASONS
from tests.support.browser import (
    App,
    ask,
    offline_env,
    open_page,
    page_boxes,
    shot,
)
from tests.support.knowledge import TINY, write_knowledge

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.e2e]


CAMPUS = [
    {"query": "体育馆几点关门？", "document": "体育馆晚上九点关门。", "metadata": "体育馆"},
    {"query": "校车从哪里发车？", "document": "校车从南门广场发车，每二十分钟一班。", "metadata": "校车"},
    {"query": "宿舍几点熄灯？", "document": "宿舍晚上十一点熄灯。", "metadata": "宿舍,熄灯"},
    {"query": "快递在哪里取？", "document": "快递在北门驿站领取。", "metadata": "快递"},
    {"query": "打印店在哪里？", "document": "打印店在图书馆一楼。", "metadata": "打印"},
]


def header(page) -> str:
    return page.locator("#kb-header").inner_text()


def sources_mode(page, question: str) -> str:
    return page.locator("#kb-sources .kb-sources").evaluate(
        "(d, q) => d.dataset.q === q ? d.dataset.mode : ''", question
    )


def set_mode(config, mode: str) -> None:
    raw = yaml.safe_load(config.read_text(encoding="utf-8"))
    raw["retrieval"]["mode"] = mode
    config.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    st = config.stat()
    os.utime(config, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    time.sleep(1.2)  # the app stats its config at most once a second


def test_config_mode_edit_applies_to_the_next_message_of_an_open_page(browser, app_config):
    raw = yaml.safe_load(app_config.read_text(encoding="utf-8"))
    raw["retrieval"]["dense"]["encoder"] = "e5"
    raw["retrieval"]["thresholds"].update(
        {"dense-e5": {"answer": 0.85, "direct": None}, "hybrid-e5": {"answer": 0.8, "direct": None}}
    )
    app_config.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    app = App(app_config, offline_env())
    try:
        page = open_page(browser, app.url)
        assert "Mode: sparse" in header(page) and "following config" in header(page)
        assert "6 entries loaded" in header(page)
        ask(page, "怎么添加知识？")
        assert sources_mode(page, "怎么添加知识？") == "sparse"
        set_mode(app_config, "dense")  # the page stays open: its selector still says "follow config"
        ask(page, "阈值是什么意思？")
        assert sources_mode(page, "阈值是什么意思？") == "dense"
        assert "Mode: dense" in header(page) and "following config" in header(page)
        assert (
            "Follow config (dense)"
            in page.locator("#kb-mode").inner_text() + page.locator("#kb-mode input").input_value()
        )
        # A session override renders the header without building anything: hybrid says it is not built yet.
        page.locator("#kb-mode input").click()
        page.get_by_role("option", name="hybrid", exact=True).click()
        page.locator("#kb-header").get_by_text("not built yet").wait_for(timeout=30000)
        assert "Mode: hybrid" in header(page) and "this session's choice" in header(page)
        ask(page, "食堂在哪里？")
        assert sources_mode(page, "食堂在哪里？") == "hybrid"
        assert "Mode: hybrid" in header(page) and "not built yet" not in header(page)
        shot(page, "chat-mode-follows-config")
    finally:
        app.stop()


def test_multi_part_message_is_answered_part_by_part(browser, app_config):
    app = App(app_config, offline_env())
    try:
        page = open_page(browser, app.url)
        ask(page, "怎么添加知识，怎么切换检索模式？")
        reply = page.locator("#kb-chat .bot").last.inner_text()
        assert "↳ 怎么添加知识" in reply and "knowledge 文件夹" in reply
        assert "↳ 怎么切换检索模式" in reply and "retrieval.mode" in reply
        assert reply.index("knowledge 文件夹") < reply.index("↳ 怎么切换检索模式")
        shot(page, "chat-multi-part")
    finally:
        app.stop()


def test_clicking_a_suggestion_asks_that_entrys_question(browser, app_config):
    kb = Path(yaml.safe_load(app_config.read_text(encoding="utf-8"))["knowledge"]["path"])
    write_knowledge(
        kb,
        {"x": {"query": "<img src=x onerror=alert(1)>资料怎么添加", "document": "脚本测试", "metadata": "脚本"}},
        name="xss.json",
    )
    app = App(app_config, offline_env())
    try:
        page = open_page(browser, app.url)
        # both entries are near (sparse 0.46 and 0.23), under the answer cut and within the suggestions' reach
        ask(page, "我要添加资料")
        options = page.locator("#kb-chat button.option")
        options.first.wait_for(timeout=30000)
        labels = options.all_inner_texts()
        assert "怎么添加知识？" in labels and "<img src=x onerror=alert(1)>资料怎么添加" in labels  # shown as text
        assert page.locator("#kb-chat img[src=x]").count() == 0
        shot(page, "chat-suggestions")
        options.get_by_text("怎么添加知识？", exact=True).click()
        page.wait_for_function(
            "() => document.querySelector('#kb-sources .kb-sources')?.dataset.q === '怎么添加知识？'", timeout=30000
        )
        assert page.locator("#kb-chat .user").last.inner_text().strip() == "怎么添加知识？"
        assert "knowledge 文件夹" in page.locator("#kb-chat .bot").last.inner_text()
    finally:
        app.stop()


def test_examples_come_from_a_replaced_knowledge_base(browser, app_config):
    kb = Path(yaml.safe_load(app_config.read_text(encoding="utf-8"))["knowledge"]["path"])
    (kb / "faq.json").unlink()
    write_knowledge(kb, CAMPUS, name="campus.json")  # none of config.yaml's ui.examples is in it
    app = App(app_config, offline_env())
    try:
        page = open_page(browser, app.url)
        examples = page.locator("#kb-examples")
        examples.get_by_text("体育馆几点关门？").wait_for(timeout=30000)
        shown = examples.inner_text()
        assert "怎么添加知识" not in shown and sum(e["query"] in shown for e in CAMPUS) == 4
        examples.get_by_text("校车从哪里发车？").click()  # a click asks it
        page.wait_for_function(
            "() => document.querySelector('#kb-sources .kb-sources')?.dataset.q === '校车从哪里发车？'", timeout=30000
        )
        # Replaced again while running: a message schedules the reload (served from the old index meanwhile: a
        # turn never waits for indexing), a later one answers from it, and a page opened after that shows its questions.
        (kb / "campus.json").unlink()
        write_knowledge(kb, TINY, name="faq.json")
        deadline = time.monotonic() + 30
        while True:
            ask(page, "怎么添加知识？")
            if "knowledge 文件夹" in page.locator("#kb-chat").inner_text() or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert "knowledge 文件夹" in page.locator("#kb-chat").inner_text()
        page = open_page(browser, app.url)
        page.locator("#kb-examples").get_by_text("怎么添加知识？").wait_for(timeout=30000)
        assert "体育馆" not in page.locator("#kb-examples").inner_text()
        page.locator("#kb-examples").get_by_text("怎么添加知识？").click()
        page.wait_for_function(
            "() => document.querySelector('#kb-sources .kb-sources')?.dataset.q === '怎么添加知识？'", timeout=30000
        )
    finally:
        app.stop()


def test_phone_width_keeps_tabs_visible_and_sources_under_the_answer(browser, app_config):
    app = App(app_config, offline_env())
    try:
        page = browser.new_page(viewport={"width": 390, "height": 844}, locale="zh-CN", is_mobile=True)
        page.goto(app.url, wait_until="domcontentloaded")
        page.locator("#kb-input textarea").wait_for(timeout=30000)
        ask(page, "怎么添加知识？")
        for name in ("对话 / Chat", "检索测试 / Retrieval test"):  # a chat user's tabs (knowledge: admins only)
            tab = page.get_by_role("tab", name=name)
            box = tab.bounding_box()
            assert tab.is_visible() and box["x"] >= 0 and box["x"] + box["width"] <= 390, name
            assert tab.evaluate("b => b.scrollWidth <= b.clientWidth + 1 && b.scrollHeight <= b.clientHeight + 1"), name
        page.locator("#kb-sources-toggle input").check()  # folded on a phone until asked for
        boxes = page_boxes(page, "#kb-chat", "#kb-sources", "#kb-input")
        chat, sources, box_input = boxes["#kb-chat"][0], boxes["#kb-sources"][0], boxes["#kb-input"][0]
        assert sources["y"] >= chat["y"] + chat["height"] - 1  # below the answer, not beside it
        assert sources["y"] - (chat["y"] + chat["height"]) < 120  # right under it: only the sources' checkbox between
        assert sources["y"] < box_input["y"] and sources["x"] < chat["x"] + chat["width"]
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 390  # no sideways scrolling
        path = shot(page, "chat-390px")
        assert path.is_file() and path.stat().st_size > 10_000
    finally:
        app.stop()


def test_a_clarify_question_shows_buttons_and_a_click_answers_the_chosen_entry(browser, app_config):
    import sqlite3

    raw = yaml.safe_load(app_config.read_text(encoding="utf-8"))
    kb = Path(raw["knowledge"]["path"])
    write_knowledge(
        kb,
        {
            "anthem": {"query": "中大的校歌是什么？", "document": "校歌是《中山大学校歌》。", "metadata": "校歌"},
            "second": {"query": "中大的第二校歌是什么？", "document": "第二校歌是《紫荆花开》。", "metadata": "校歌"},
        },
        name="songs.json",
    )
    # 0.8: only the two songs pass (the starter's "阈值是什么意思？" shares 是什么), and a clarify question offers
    # every passing candidate up to ladder.max_options
    # settle off: "校歌是什么" says more of the first song's question, and the shipped settle would answer it
    raw["retrieval"]["thresholds"]["sparse"] = {
        "answer": 0.8,
        "direct": None,
        "clarify": 0.05,
        "confirm": None,
        "settle": None,
    }
    app_config.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    app = App(app_config, offline_env())
    try:
        page = open_page(browser, app.url)
        ask(page, "校歌是什么")
        options = page.locator("#kb-chat button.option")
        options.first.wait_for(timeout=30000)
        assert set(options.all_inner_texts()) == {"中大的第二校歌是什么？", "中大的校歌是什么？"}
        assert "您想问的是" in page.locator("#kb-chat .bot").last.inner_text()
        shot(page, "chat-clarify")
        options.get_by_text("中大的第二校歌是什么？", exact=True).click()
        page.wait_for_function(
            "() => document.querySelector('#kb-sources .kb-sources')?.dataset.q === '中大的第二校歌是什么？'",
            timeout=30000,
        )
        assert "紫荆花开" in page.locator("#kb-chat .bot").last.inner_text()
        assert "chosen option" in page.locator("#kb-sources").inner_text()
    finally:
        app.stop()
    log = Path(raw["state_dir"]) / "log" / "turns.sqlite"
    with sqlite3.connect(log) as db:
        rows = db.execute("SELECT question, strategy FROM turns ORDER BY id").fetchall()
    assert rows[-2:] == [("校歌是什么", "clarify"), ("中大的第二校歌是什么？", "chosen")]  # the choice is logged


def test_the_flag_reasons_of_the_last_answer_open_inside_the_chat_box(browser, app_config):
    app = App(app_config, offline_env())
    try:
        page = open_page(browser, app.url)
        for question in ("怎么添加知识？", "怎么切换检索模式？", "阈值是什么意思？", "图书馆开放时间"):
            ask(page, question)
        page.locator("#kb-chat .bot").last.hover()
        page.locator("#kb-chat").get_by_label("Feedback", exact=True).last.click()
        chat = page.locator("#kb-chat").bounding_box()
        assert chat is not None
        for _, reason in DOWN_REASONS:  # the fixed choices a 👎 offers
            box = page.locator("#kb-chat").get_by_text(reason, exact=True).last.bounding_box()
            assert box is not None and chat["y"] <= box["y"] and box["y"] + box["height"] <= chat["y"] + chat["height"]
        shot(page, "chat-flag-reasons")
    finally:
        app.stop()
