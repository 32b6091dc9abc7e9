"""The Gradio app through gradio_client, on a free loopback port."""

from __future__ import annotations

import socket

import pytest

from bot.factory import build_bot
from bot.ui import build_demo


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def served(settings):
    """The app for the tiny knowledge base, served in-process; yields (client, bot)."""
    from gradio_client import Client

    settings.retrieval.sparse.threshold = 8.0
    bot = build_bot(settings)
    demo = build_demo(bot, settings).queue()
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    try:
        yield Client(f"http://127.0.0.1:{port}/", verbose=False), bot
    finally:
        demo.close()


def test_chat_answers_with_source_and_escapes_html(served, kb_dir):
    client, bot = served
    history, box, sources = client.predict("怎么添加知识？", [], api_name="/chat")
    assert box == ""
    reply = history[-1]["content"]
    reply = reply if isinstance(reply, str) else "".join(p.get("text", "") for p in reply)
    assert "仅检索模式" in reply and "knowledge 文件夹" in reply
    assert "怎么添加知识？" in sources and "direct" in sources


def test_off_topic_gets_last_resort(served):
    client, _ = served
    _, _, sources = client.predict("今天天气怎么样", [], api_name="/chat")
    assert "last resort" in sources


def test_knowledge_html_is_rendered_escaped(served, kb_dir):
    import json

    client, bot = served
    bot.index.check_interval = 0
    (kb_dir / "xss.json").write_text(json.dumps(
        {"x": {"query": "脚本注入测试<script>alert(1)</script>", "document": "<img src=x onerror=alert(1)>危险内容", "metadata": "脚本注入"}},
        ensure_ascii=False), encoding="utf-8")
    history, _, sources = client.predict("脚本注入测试", [], api_name="/chat")
    assert "<script>" not in sources and "&lt;script&gt;" in sources
    reply = history[-1]["content"]
    reply = reply if isinstance(reply, str) else "".join(p.get("text", "") for p in reply)
    assert "<img" not in reply and "&lt;img" in reply


def test_header_shows_mode_and_retrieval_only(settings):
    from bot.ui import header_markdown

    bot = build_bot(settings)
    header = header_markdown(bot, settings)
    assert "`sparse`" in header and "Retrieval-only" in header


def test_app_binds_loopback_by_default():
    import app

    args = app.parse_args([])
    assert args.host is None and not args.share
    from bot.config import load_settings
    from tests.conftest import ROOT

    assert load_settings(ROOT / "config.yaml").ui.host == "127.0.0.1"
