"""What a newcomer trips over (issue 22), in headless Chromium against `python app.py`: no traceback on page load
without admin variables, and a five-hit sources table that stays in its box at phone width. Fixtures as in
test_browser."""

from __future__ import annotations

import time

import pytest
import yaml

from tests.conftest import config_dict, write_knowledge
from tests.test_browser import App, ask, offline_env, open_page, shot

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# Five entries that all share the words of FIVE_HITS, so a question about them has five sources.
LIBRARY = {
    f"lib{i}": {"query": f"图书馆{room}在哪里？", "document": f"图书馆{room}在{i}楼。", "metadata": f"图书馆,{room}"}
    for i, room in enumerate(("自习室", "阅览室", "复印室", "讨论室", "报告厅"), 1)
}
FIVE_HITS = "图书馆的自习室、阅览室、复印室、讨论室和报告厅在哪里？"


def library_config(tmp_path):
    """config.yaml over LIBRARY, with a low sparse threshold so that all five entries pass it."""
    write_knowledge(tmp_path / "knowledge", LIBRARY)
    raw = config_dict(tmp_path, tmp_path / "knowledge", sparse=0.05)
    raw["retrieval"]["top_k"] = 5
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
        assert page.locator("#kb-sources .kb-hits tr").count() == 6  # the header row and five hits
        # One vocabulary: the Searcher column names the mode as the header does, not the engine (tantivy).
        assert page.locator("#kb-sources .kb-hits td:nth-child(4)").all_inner_texts() == ["sparse"] * 5
        page.evaluate("() => window.scrollTo(0, 0)")
        sources = page.locator("#kb-sources").bounding_box()
        if width < 640:
            # The sources scroll inside their box instead of spilling over what follows.
            assert page.locator("#kb-sources").evaluate(
                "el => getComputedStyle(el).overflowY === 'auto' && el.scrollHeight > el.clientHeight"
            )
            assert sources["height"] <= height / 2 + 1
        others = ["#kb-input", "#kb-buttons", "#kb-examples"]
        for selector in others:
            for i in range(page.locator(selector).count()):
                box = page.locator(selector).nth(i).bounding_box()
                if box:
                    assert not _overlaps(sources, box), (selector, sources, box)
        shot(page, f"chat-five-hits-{width}px")
    finally:
        app.stop()
