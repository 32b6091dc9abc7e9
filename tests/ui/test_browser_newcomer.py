"""What a newcomer trips over, in headless Chromium against `python app.py`: no traceback on page load
without admin variables, and a five-hit sources table that stays in its box at phone width. Fixtures as in
test_browser."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
import yaml

from tests.support.browser import (
    ADMIN_ENV,
    App,
    ask,
    offline_env,
    open_knowledge_tab,
    open_page,
    open_tab,
    page_boxes,
    shot,
)
from tests.support.knowledge import TINY, config_dict, write_knowledge

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.e2e]

# Five entries that all share the words of FIVE_HITS, so a question about them has five sources.
LIBRARY = {
    f"lib{i}": {"query": f"图书馆{room}在哪里？", "document": f"图书馆{room}在{i}楼。", "metadata": f"图书馆,{room}"}
    for i, room in enumerate(("自习室", "阅览室", "复印室", "讨论室", "报告厅"), 1)
}
FIVE_HITS = "图书馆的自习室、阅览室、复印室、讨论室和报告厅在哪里？"
WRONG = "图书馆的开放时间是几点？"  # answered by TINY's library entry, then given a thumbs down


def library_config(tmp_path):
    """config.yaml over LIBRARY, with a low sparse threshold so that all five entries pass it."""
    write_knowledge(tmp_path / "knowledge", LIBRARY)
    raw = config_dict(tmp_path, tmp_path / "knowledge", sparse=0.05)
    raw["retrieval"]["top_k"] = 5
    # a plain answer with its five sources: no "did you mean" among close candidates, no "not sure"
    raw["retrieval"]["thresholds"]["sparse"].update(clarify=None, unsure=None)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return path


def test_page_loads_without_admin_variables_log_no_traceback(browser, app_config):
    env = {k: v for k, v in offline_env().items() if not k.startswith("KBBOT_ADMIN")}
    app = App(app_config, env)
    try:
        for _ in range(3):
            page = open_page(browser, app.url)
            time.sleep(3)  # the page's load events run (nothing on the page shows when they are done)
            page.close()
        log = (app_config.parent / f"app-{app.port}.log").read_text(encoding="utf-8")
        assert "Traceback" not in log and "ERROR" not in log, log[-3000:]
    finally:
        app.stop()


def _overlaps(a: dict, b: dict) -> bool:
    return not (
        a["x"] + a["width"] <= b["x"] + 0.5
        or b["x"] + b["width"] <= a["x"] + 0.5
        or a["y"] + a["height"] <= b["y"] + 0.5
        or b["y"] + b["height"] <= a["y"] + 0.5
    )


@pytest.mark.parametrize("width,height", [(390, 844), (1400, 1000)])
def test_five_hit_sources_scroll_inside_their_box(browser, tmp_path, width, height):
    app = App(library_config(tmp_path), offline_env())
    try:
        page = browser.new_page(viewport={"width": width, "height": height}, locale="zh-CN", is_mobile=width < 640)
        page.goto(app.url, wait_until="domcontentloaded")
        page.locator("#kb-input textarea").wait_for(timeout=30000)
        ask(page, FIVE_HITS)
        if width < 640:  # folded on a phone until asked for
            page.locator("#kb-sources-toggle input").check()
        assert page.locator("#kb-sources .kb-hits tr").count() == 6  # the header row and five hits
        # One vocabulary: the Searcher column names the mode as the header does, not the engine (tantivy).
        assert page.locator("#kb-sources .kb-hits td:nth-child(4)").all_inner_texts() == ["sparse"] * 5
        others = ["#kb-input", "#kb-buttons", "#kb-examples"]
        boxes = page_boxes(page, "#kb-sources", *others)
        sources = boxes["#kb-sources"][0]
        if width < 640:
            # The sources scroll inside their box instead of spilling over what follows.
            assert page.locator("#kb-sources").evaluate(
                "el => getComputedStyle(el).overflowY === 'auto' && el.scrollHeight > el.clientHeight"
            )
            assert sources["height"] <= height / 2 + 1
        for selector in others:
            for box in boxes[selector]:
                if box["width"] and box["height"]:  # a hidden element has an empty box
                    assert not _overlaps(sources, box), (selector, sources, box)
        shot(page, f"chat-five-hits-{width}px")
    finally:
        app.stop()


def test_on_a_phone_the_answer_is_on_screen_after_sending_and_the_sources_fold(browser, tmp_path):
    app = App(library_config(tmp_path), offline_env())
    try:
        page = browser.new_page(viewport={"width": 390, "height": 844}, locale="zh-CN", is_mobile=True)
        page.goto(app.url, wait_until="domcontentloaded")
        page.locator("#kb-input textarea").wait_for(timeout=30000)
        for question in ("图书馆的开放时间？", FIVE_HITS):  # the second answer is long, with five sources
            ask(page, question)
        page.wait_for_timeout(1000)  # the scroll after the answer
        answer = page.locator("#kb-chat .bot-row").last.bounding_box()
        typing = page.locator("#kb-input").bounding_box()
        assert answer is not None and typing is not None
        assert 0 <= answer["y"] < 844 and answer["y"] + 40 < typing["y"], answer  # the answer's start is on screen
        assert typing["y"] + typing["height"] <= 844, typing  # and so is the input, right below the chat
        assert not page.locator("#kb-sources").is_visible() and page.locator("#kb-sources-toggle").is_visible()
        shot(page, "chat-answer-on-screen-390px")
        page.locator("#kb-sources-toggle input").check()
        assert page.locator("#kb-sources .kb-hits").is_visible()
        shot(page, "chat-sources-open-390px")
        page.locator("#kb-sources-toggle input").uncheck()
        assert not page.locator("#kb-sources").is_visible()
        page.set_viewport_size({"width": 1400, "height": 1000})  # on a wide screen: no toggle, the sources shown
        assert page.locator("#kb-sources .kb-hits").is_visible() and not page.locator("#kb-sources-toggle").is_visible()
    finally:
        app.stop()


def textarea(page, elem_id: str) -> str:
    return page.locator(f"#{elem_id} textarea").input_value()


def wait_value(page, elem_id: str, value: str) -> None:
    page.wait_for_function(
        "([id, v]) => document.querySelector(`#${id} textarea`).value === v", arg=[elem_id, value], timeout=30000
    )


def test_inbox_forms_start_clean_and_a_wrong_answer_becomes_a_phrasing_of_its_entry(browser, app_config):
    knowledge = Path(yaml.safe_load(app_config.read_text(encoding="utf-8"))["knowledge"]["path"]) / "faq.json"
    app = App(app_config, dict(offline_env(), **ADMIN_ENV))
    try:
        page = open_knowledge_tab(browser, app)
        open_tab(page, "对话 / Chat")
        for question in ("停车场怎么收费？", "游泳馆几点开门？", WRONG):
            ask(page, question)
        page.locator("#kb-chat .bot").last.hover()
        page.locator("#kb-chat").get_by_label(re.compile(r"^(Dislike|踩)$")).last.click()
        page.locator("#kb-feedback-reason textarea").fill("问的是周末")
        page.locator("#kb-feedback-send").click()

        open_tab(page, "待解决问题 / Unanswered")
        wait_value(page, "kb-inbox-query", WRONG)  # the newest group is picked
        # The thumbs-down answer's entry is offered for the phrasing: no id to type by hand.
        page.get_by_text("添加为已有条目的问法 / Add as a phrasing of an entry").click()
        assert "faq:library" in page.locator("#kb-inbox-entry input").input_value()
        assert textarea(page, "kb-inbox-phrasing") == WRONG
        assert "answered" in page.locator("#kb-inbox-table").inner_text()
        shot(page, "inbox-thumbs-down-entry")
        page.locator("#kb-inbox-add").click()
        page.locator("#kb-inbox-status").get_by_text("index updated").wait_for(timeout=30000)

        wait_value(page, "kb-inbox-query", "游泳馆几点开门？")  # the next group, its own question
        page.locator("#kb-inbox-document textarea").fill("游泳馆早上七点开门。")
        page.locator("#kb-inbox-metadata textarea").fill("游泳馆,开门")
        page.locator("#kb-inbox-new").click()
        page.locator("#kb-inbox-status").get_by_text("index updated").wait_for(timeout=30000)
        # The next question's form starts clean: nothing of the swimming-pool entry is one click from saving.
        wait_value(page, "kb-inbox-query", "停车场怎么收费？")
        assert textarea(page, "kb-inbox-document") == "" and textarea(page, "kb-inbox-metadata") == ""
        shot(page, "inbox-next-question-clean")
        page.set_viewport_size({"width": 390, "height": 844})
        table = page.locator("#kb-inbox-table")  # scrolls sideways in its box, not off the page
        assert table.evaluate("el => getComputedStyle(el).overflowX === 'auto'")
        assert table.bounding_box()["x"] + table.bounding_box()["width"] <= 390
        shot(page, "inbox-next-question-clean-390px")
        page.set_viewport_size({"width": 1400, "height": 1000})

        # The knowledge form shows and edits the entry's phrasings, one per line.
        open_tab(page, "知识管理 / Knowledge")
        page.locator("#kb-k-file input").click()
        page.get_by_role("option", name="faq.json").click()
        page.locator("#kb-k-key input").click()
        page.get_by_role("option", name="library", exact=True).click()
        wait_value(page, "kb-k-questions", WRONG)
        page.locator("#kb-k-questions textarea").fill(f"{WRONG}\n图书馆几点关门？")
        page.locator("#kb-k-save").click()
        page.locator("#kb-k-status").get_by_text("index updated").wait_for(timeout=30000)
        shot(page, "knowledge-phrasings")
        page.locator("#kb-k-new").click()
        wait_value(page, "kb-k-questions", "")  # a new entry starts without the last one's phrasings
        assert textarea(page, "kb-k-query") == ""
    finally:
        app.stop()
    saved = json.loads(knowledge.read_text(encoding="utf-8"))
    assert saved["library"]["questions"] == [WRONG, "图书馆几点关门？"]
    assert saved["library"]["document"] == TINY["library"]["document"]  # the phrasing did not touch the rest
    assert any(v.get("query") == "游泳馆几点开门？" and v["document"] == "游泳馆早上七点开门。" for v in saved.values())


def test_a_cold_switch_to_dense_shows_build_progress_in_the_header_by_itself(browser, tmp_path):
    entries = {
        f"r{i}": {
            "query": f"第{i}号规定是什么？",
            "document": f"第{i}号规定：读者在图书馆第{i}区需要保持安静。",
            "metadata": "",
        }
        for i in range(400)
    }
    write_knowledge(tmp_path / "knowledge", entries)
    raw = config_dict(tmp_path, tmp_path / "knowledge", sparse=0.3)
    raw["retrieval"]["dense"]["encoder"] = "e5"
    raw["retrieval"]["thresholds"]["dense-e5"] = {"answer": 0.85, "direct": None}
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    app = App(config, offline_env())
    try:
        page = open_page(browser, app.url)
        page.locator("#kb-mode input").click()
        page.get_by_role("option", name="dense", exact=True).click()
        ask(page, "第7号规定是什么？")  # answered by sparse while dense builds: the panel says so
        head = page.locator("#kb-sources .kb-sources p").first.inner_text()
        # the stand-in answers only above its own cut plus the shipped stand-in margin (0.3 + 0.1)
        assert "sparse answers meanwhile" in head and "sparse ≥ 0.4" in head, head
        building = page.locator("#kb-header .kb-building")
        building.wait_for(timeout=60000)  # no reload, no message: the header's timer brings it
        first = building.inner_text()
        assert re.search(r"faiss [\d,]+/[\d,]+ \(\d+%\)", first), first
        page.wait_for_function(  # it moves on by itself
            "t => { const b = document.querySelector('#kb-header .kb-building'); return !b || b.innerText !== t }",
            arg=first,
            timeout=60000,
        )
        shot(page, "header-building")
        page.set_viewport_size({"width": 390, "height": 844})
        shot(page, "header-building-390px")
        building.wait_for(state="detached", timeout=240000)  # and leaves when the index is done
        assert "Mode: dense" in page.locator("#kb-header").inner_text()
    finally:
        app.stop()


def test_a_typo_in_the_config_mode_is_shown_to_admins_in_the_page(browser, app_config):
    app = App(app_config, dict(offline_env(), **ADMIN_ENV))
    try:
        page = open_knowledge_tab(browser, app)
        assert page.locator("#kb-k-health").inner_text().strip() == ""
        text = app_config.read_text(encoding="utf-8")
        app_config.write_text(text.replace("mode: sparse", "mode: hybird", 1), encoding="utf-8")
        time.sleep(1.2)  # the app stats its config at most once a second
        open_tab(page, "对话 / Chat")
        ask(page, "怎么添加知识？")
        assert "The last edit of config.yaml has an error" in page.locator("#kb-header").inner_text()
        page = open_knowledge_tab(browser, app)  # the admin's next page load: the error in full
        health = page.locator("#kb-k-health")
        health.get_by_text("retrieval.mode").wait_for(timeout=30000)
        assert "was not applied" in health.inner_text() and "still using mode sparse" in health.inner_text()
        shot(page, "knowledge-config-error")
        page.set_viewport_size({"width": 390, "height": 844})
        shot(page, "knowledge-config-error-390px")
    finally:
        app.stop()


def test_a_long_answer_shows_from_its_start_below_the_chat_label_and_toolbar(browser, tmp_path):
    rules = "\n\n".join(f"第{i}条：借书证丢失后请到服务台补办，补办需要带上学生证和一张照片。" for i in range(1, 31))
    write_knowledge(
        tmp_path / "knowledge", {"card": {"query": "借书证丢了怎么办？", "document": rules, "metadata": "借书证"}}
    )
    raw = config_dict(tmp_path, tmp_path / "knowledge", sparse=0.3)
    raw["retrieval"]["passages"]["enabled"] = False
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    app = App(config, offline_env())
    try:
        for width, height in ((390, 844), (1400, 1000)):
            page = browser.new_page(viewport={"width": width, "height": height}, locale="zh-CN", is_mobile=width < 640)
            page.goto(app.url, wait_until="domcontentloaded")
            page.locator("#kb-input textarea").wait_for(timeout=30000)
            ask(page, "借书证丢了怎么办？")
            page.wait_for_function(  # the answer's start (its title line) is in view, not its end
                """() => { const w = document.querySelector('#kb-chat .bubble-wrap').getBoundingClientRect();
                  const b = [...document.querySelectorAll('#kb-chat .bot-row')].pop().getBoundingClientRect();
                  return b.top >= w.top - 1 && b.top < w.bottom; }""",
                timeout=30000,
            )
            wrap = page.locator("#kb-chat .bubble-wrap").bounding_box()
            for overlay in ("#kb-chat label", "#kb-chat .top-panel"):
                box = page.locator(overlay).first.bounding_box()
                assert box["y"] + box["height"] <= wrap["y"] + 1, (overlay, box, wrap)  # nothing scrolls under it
            shot(page, f"chat-long-answer-{width}px")
            page.close()
    finally:
        app.stop()


def test_the_import_status_shows_right_under_the_import_button(browser, app_config, tmp_path):
    sheet = tmp_path / "gym.csv"
    sheet.write_text("问题,答案\n体育馆几点关门？,晚上九点。\n", encoding="utf-8-sig")
    app = App(app_config, dict(offline_env(), **ADMIN_ENV))
    try:
        page = open_knowledge_tab(browser, app)
        page.get_by_text("导入与导出 / Import and export").click()
        page.locator("#kb-k-upload input[type=file]").set_input_files(str(sheet))
        page.locator("#kb-k-import").click()
        status = page.locator("#kb-k-import-status")
        status.get_by_text("Imported gym.csv: 1 entries").wait_for(timeout=30000)
        button, box = page.locator("#kb-k-import").bounding_box(), status.bounding_box()
        assert 0 <= box["y"] - (button["y"] + button["height"]) < 80, (button, box)
        status.scroll_into_view_if_needed()
        shot(page, "knowledge-import-status")
    finally:
        app.stop()


def test_a_new_entry_from_the_inbox_takes_phrasings_picks_the_questions_file_and_warns_of_a_duplicate(
    browser, tmp_path
):
    english = {k: v for k, v in TINY.items() if k == "ollama"} | {
        "hours": {"query": "When does the library open?", "document": "At 8 am.", "metadata": "library,hours"}
    }
    chinese = {k: v for k, v in TINY.items() if k != "ollama"}
    write_knowledge(tmp_path / "knowledge", english, "guide_en.json")  # listed first: the old default
    write_knowledge(tmp_path / "knowledge", chinese, "guide_zh.json")
    raw = config_dict(tmp_path, tmp_path / "knowledge", sparse=0.5)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    app = App(config, dict(offline_env(), **ADMIN_ENV))
    try:
        page = open_knowledge_tab(browser, app)
        open_tab(page, "对话 / Chat")
        for question in ("火星上有几座城市？", "火星上有几座城市", "月球上有几座城市？"):
            ask(page, question)
        open_tab(page, "待解决问题 / Unanswered")
        wait_value(page, "kb-inbox-query", "月球上有几座城市？")
        assert page.locator("#kb-inbox-file input").input_value() == "guide_zh.json"  # the question's language
        page.locator("#kb-inbox-pick input").click()
        page.get_by_role("option", name=re.compile("火星上有几座城市")).click()
        wait_value(page, "kb-inbox-query", "火星上有几座城市")
        wait_value(page, "kb-inbox-phrasings", "火星上有几座城市？")  # the group's other wording, one per line
        page.locator("#kb-inbox-phrasings textarea").fill("火星上有几座城市？\n火星有城市吗")
        page.locator("#kb-inbox-document textarea").fill("火星上还没有城市。")
        shot(page, "inbox-new-entry-phrasings")
        page.locator("#kb-inbox-new").click()
        page.locator("#kb-inbox-status").get_by_text("index updated").wait_for(timeout=30000)
        saved = json.loads((tmp_path / "knowledge" / "guide_zh.json").read_text(encoding="utf-8"))
        [new] = [v for v in saved.values() if v["query"] == "火星上有几座城市"]
        assert new["questions"] == ["火星上有几座城市？", "火星有城市吗"]
        # The moon's group is left; typing a question an entry already asks is refused, naming the entry.
        wait_value(page, "kb-inbox-query", "月球上有几座城市？")
        page.locator("#kb-inbox-query textarea").fill("食堂在哪里")
        page.locator("#kb-inbox-document textarea").fill("东区。")
        page.locator("#kb-inbox-new").click()
        page.locator("#kb-inbox-status").get_by_text("already asks").wait_for(timeout=30000)
        assert "guide_zh:canteen" in page.locator("#kb-inbox-status").inner_text()
        assert (
            sum(
                v["query"].startswith("食堂")
                for v in json.loads((tmp_path / "knowledge" / "guide_zh.json").read_text(encoding="utf-8")).values()
            )
            == 1
        )
        shot(page, "inbox-new-entry-duplicate")
    finally:
        app.stop()


def test_the_knowledge_tab_starts_with_a_file_chosen_and_last_hits_to_the_minute(browser, app_config):
    app = App(app_config, dict(offline_env(), **ADMIN_ENV))
    try:
        page = open_knowledge_tab(browser, app)
        open_tab(page, "对话 / Chat")
        ask(page, "怎么添加知识？")  # one hit for faq:add
        page.reload(wait_until="domcontentloaded")
        open_tab(page, "知识管理 / Knowledge")
        page.wait_for_function("() => document.querySelector('#kb-k-file input').value === 'faq.json'", timeout=30000)
        page.locator("#kb-k-key input").click()
        page.get_by_role("option", name="add", exact=True).wait_for(timeout=30000)  # its keys one click away
        page.keyboard.press("Escape")
        table = page.locator("#kb-eb-table")
        table.get_by_text("怎么添加知识？").first.wait_for(timeout=30000)
        page.wait_for_function(
            "() => /\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d/.test(document.querySelector('#kb-eb-table').innerText)",
            timeout=30000,
        )
        assert not re.search(r"T\d\d:\d\d:\d\d", table.inner_text())  # not ISO with seconds and microseconds
        shot(page, "knowledge-tab-file-chosen")
    finally:
        app.stop()
