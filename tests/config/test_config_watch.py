"""Editing retrieval.mode in config.yaml switches the running bot (the app watches its config file)."""

from __future__ import annotations

import os
import time

import pytest
import yaml

from bot.chat.bot import Bot
from bot.config.settings import load_settings
from bot.config.watch import ConfiguredMode
from bot.factory import build_bot, build_knowledge_base
from bot.ui.app import FOLLOW, ChatHandlers
from tests.support.knowledge import config_dict

pytestmark = pytest.mark.unit


@pytest.fixture
def config_path(tmp_path, kb_dir, monkeypatch):
    monkeypatch.delenv("KBBOT_MODE", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    raw = config_dict(tmp_path, kb_dir, sparse=0.5)  # starts in the sparse mode
    raw["retrieval"]["dense"]["encoder"] = "e5"
    raw["retrieval"]["thresholds"].update(
        {"dense-e5": {"answer": 0.85, "direct": None}, "hybrid-e5": {"answer": 0.8, "direct": None}}
    )
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return path


def check_every_turn(bot: Bot) -> None:
    """Make the bot's config watcher look at the file at every turn (it is there: the bot was built watching)."""
    configured = bot.search.current_mode.configured
    assert isinstance(configured, ConfiguredMode)
    configured.check_interval = 0


def set_mode(path, mode: str) -> None:
    text = path.read_text(encoding="utf-8")
    current = yaml.safe_load(text)["retrieval"]["mode"]
    path.write_text(text.replace(f"mode: {current}", f"mode: {mode}", 1), encoding="utf-8")
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # a distinct mtime even on coarse clocks


def test_editing_the_mode_switches_the_running_bot_and_new_pages(config_path):
    bot = build_bot(load_settings(config_path), watch_config=True)
    check_every_turn(bot)
    assert bot.answer("怎么添加知识？").mode == "sparse"
    set_mode(config_path, "dense")
    answer = bot.answer("怎么添加知识？")
    assert answer.mode == "dense" and answer.hits and answer.hits[0].searcher == "faiss"
    # A new page follows the config: the selector's default is "follow" (no override), its label names the mode.
    settings = load_settings(config_path)
    header, selector, *_ = ChatHandlers(build_knowledge_base(settings, bot), settings).page_defaults()
    assert "`dense`" in header and "following config" in header and selector["value"] == FOLLOW
    assert ("跟随配置 / Follow config (dense)", FOLLOW) in selector["choices"]
    set_mode(config_path, "hybrid")
    answer = bot.answer("怎么添加知识？")
    assert answer.mode == "hybrid" and answer.hits[0].searcher == "hybrid"
    assert answer.thresholds is not None and answer.thresholds.system == "hybrid-e5"


def test_a_broken_config_edit_keeps_the_last_mode(config_path, caplog):
    bot = build_bot(load_settings(config_path), watch_config=True)
    check_every_turn(bot)
    config_path.write_text(config_path.read_text(encoding="utf-8") + "\nnot_a_key: 1\n", encoding="utf-8")
    time.sleep(0.01)
    assert bot.answer("怎么添加知识？").mode == "sparse"
    assert any("config change ignored" in r.getMessage() for r in caplog.records)
    set_mode(config_path, "nonsense")  # rejected at load (retrieval.mode is one of sparse, dense, hybrid)
    assert bot.answer("怎么添加知识？").mode == "sparse"
    assert any("config change ignored" in r.getMessage() and "retrieval.mode" in r.getMessage() for r in caplog.records)


def test_the_cli_mode_flag_is_not_overridden(config_path):
    bot = build_bot(load_settings(config_path))  # the CLI builds without watching
    assert bot.search.current_mode.configured is None


def test_a_typo_in_the_mode_is_shown_in_the_page_until_fixed(config_path, kb_dir):
    settings = load_settings(config_path)
    bot = build_bot(settings, watch_config=True)
    check_every_turn(bot)
    handlers = ChatHandlers(build_knowledge_base(settings, bot), settings)
    assert "config.yaml" not in handlers.header(None)
    set_mode(config_path, "hybird")
    assert bot.answer("怎么添加知识？").mode == "sparse"
    status = bot.status()
    assert status.config_error is not None
    assert "retrieval.mode: Input should be" in status.config_error and "still using mode sparse" in status.config_error
    header = handlers.header(None)  # every page: one line, no detail (it names server paths)
    assert "The last edit of config.yaml has an error" in header and str(config_path) not in header
    from bot.ui.render import health_html

    assert "retrieval.mode: Input should be" in health_html(status) and "was not applied" in health_html(status)
    set_mode(config_path, "dense")
    assert bot.answer("怎么添加知识？").mode == "dense" and bot.status().config_error is None
    assert "config.yaml" not in handlers.header(None)
