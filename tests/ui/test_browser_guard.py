"""In Chromium: an answer and an entry holding remote image URLs make no request to the remote host, in the chat
answer, the sources panel, the retrieval test and the knowledge tab; links open only on click, without a referrer."""

from __future__ import annotations

import json
from urllib.parse import urlparse

import pytest
import yaml

from tests.support.browser import chromium, llm_app, open_as_admin, open_tab, shot
from tests.support.knowledge import TINY, config_dict, write_knowledge

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.e2e]

TRACKER = "198.51.100.7"
BAIT = f"看图 ![x](http://{TRACKER}/track.png) 和 <img src=http://{TRACKER}/x.png> 以及 [链接](http://{TRACKER}/page)"


def test_remote_images_in_answers_and_entries_are_never_fetched(tmp_path, llm_server):
    kb = tmp_path / "knowledge"
    write_knowledge(
        kb,
        {
            **TINY,
            "bait": {
                "query": f"图片追踪测试 ![q](http://{TRACKER}/q.png)",
                "document": BAIT,
                "metadata": "图片追踪测试",
            },
        },
    )
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(config_dict(tmp_path, kb, sparse=0.3), allow_unicode=True), encoding="utf-8")
    llm_server.reply = lambda body: f"回答 [1]：{BAIT}"
    app = llm_app(config, llm_server.url, admin=True)  # the knowledge tab: admins only
    remote: list[str] = []
    try:
        with chromium() as browser:
            context = browser.new_context(viewport={"width": 1400, "height": 1000}, locale="zh-CN")

            def route(r):
                if urlparse(r.request.url).hostname in ("127.0.0.1", "localhost"):
                    r.continue_()
                else:  # recorded, never sent (the test must not depend on the network)
                    remote.append(r.request.url)
                    r.abort()

            context.route("**/*", route)
            page = open_as_admin(context.new_page(), app)
            headers = page.request.get(app.url).headers
            assert "img-src 'self' data: blob:" in headers["content-security-policy"]
            box = page.locator("#kb-input textarea")
            box.fill("图片追踪测试")
            box.press("Enter")
            page.locator("#kb-sources").get_by_text("图片追踪测试").wait_for(timeout=30000)
            page.locator("#kb-chat").get_by_text("看图").last.wait_for(timeout=30000)
            chat = page.locator("#kb-chat").inner_text()
            # a remote picture shows its alt text, raw HTML shows as text
            assert "看图 x 和" in chat and "<img src=" in chat and "![x]" not in chat
            links = page.eval_on_selector_all(
                f"#kb-chat a[href*='{TRACKER}']", "els => els.map(a => [a.rel, a.target])"
            )
            assert links and all("noopener" in rel and "noreferrer" in rel for rel, _ in links), links

            open_tab(page, "检索测试 / Retrieval test")
            query = page.locator("#kb-rt-query textarea")
            query.fill("图片追踪测试")
            query.press("Enter")
            page.locator("#kb-rt-results").get_by_text("faq:bait").first.wait_for(timeout=60000)

            open_tab(page, "知识管理 / Knowledge")
            page.wait_for_function(
                "() => document.querySelector('#kb-eb-table')?.innerText.includes('图片追踪测试')", timeout=30000
            )
            page.locator("#kb-k-file input").click()
            page.get_by_role("option", name="faq.json").click()
            page.locator("#kb-k-key input").click()
            page.get_by_role("option", name="bait").click()
            page.wait_for_function(
                "() => (document.querySelector('#kb-k-document textarea') || {}).value?.includes('track.png')",
                timeout=30000,
            )
            page.wait_for_timeout(1000)  # let any lazily rendered image start loading
            shot(page, "guard-knowledge")
            images = page.eval_on_selector_all("img", "els => els.map(i => i.src)")
            assert not [src for src in images if TRACKER in src], images
            context.close()
    finally:
        app.stop()
    assert not [url for url in remote if TRACKER in url], remote
    assert json.dumps(remote) == "[]", f"remote requests: {remote}"
