"""Edits made on disk answer the very next message: after `python -m bot knowledge add …` in a real
subprocess, and after a broken file is deleted, both for the CLI-style bot and for the background bot the app builds."""

from __future__ import annotations

import pytest
import yaml

from bot.chat.answer import Strategy
from bot.config.settings import load_settings
from bot.factory import build_bot
from tests.support.cli import knowledge as cli
from tests.support.knowledge import config_dict

pytestmark = pytest.mark.e2e

PARKING = "停车场怎么收费？"


@pytest.fixture
def config_file(tmp_path, kb_dir, jieba_cache):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config_dict(tmp_path, kb_dir), allow_unicode=True), encoding="utf-8")
    return path


@pytest.fixture(params=["inline", "background"])
def bot(request, config_file, monkeypatch):
    """The bot as the CLI builds it (inline), or as app.py builds it (background workers, last good kept)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("KBBOT_MODE", raising=False)
    settings = load_settings(config_file)
    if request.param == "inline":
        return build_bot(settings)
    bot = build_bot(settings, watch_config=True, keep_last_good=True)
    assert bot.index.wait_ready("sparse", 60)
    return bot


def test_an_entry_added_by_the_cli_answers_the_next_message(bot, config_file):
    assert bot.answer(PARKING).strategy is Strategy.LAST_RESORT
    done = cli(config_file, "add", "--file", "faq.json", "--query", PARKING, "--document", "校内停车每小时五元。")
    assert done.returncode == 0, done.stderr
    answer = bot.answer(PARKING)  # the very next message, within a second of the last
    assert answer.strategy is Strategy.DIRECT and "每小时五元" in answer.text
    done = cli(config_file, "delete", "faq.json:1")
    assert done.returncode == 0, done.stderr
    assert bot.answer(PARKING).strategy is Strategy.LAST_RESORT


def test_deleting_a_broken_file_clears_the_problem_at_the_next_message(bot, kb_dir):
    broken = kb_dir / "broken.json"
    broken.write_text("{not json", encoding="utf-8")
    assert bot.answer("怎么添加知识？").knowledge_error
    broken.unlink()
    answer = bot.answer("怎么添加知识？")
    assert not answer.knowledge_error and answer.hits[0].entry.id == "faq:add"


def test_the_page_header_and_the_admin_table_show_a_cli_add_before_any_message(bot, config_file):
    from bot.factory import build_knowledge_base
    from bot.ui.chat_handlers import ChatHandlers
    from bot.ui.entry_browser import EntryBrowser

    settings = load_settings(config_file)
    kb = build_knowledge_base(settings, bot)  # what the page is given
    handlers, table = ChatHandlers(kb, settings), EntryBrowser(kb.editor)
    assert "6 entries loaded" in handlers.page_defaults()[0]
    done = cli(config_file, "add", "--file", "faq.json", "--query", PARKING, "--document", "校内停车每小时五元。")
    assert done.returncode == 0, done.stderr
    rows, info, _ = table.show(PARKING, 1)  # the admin opens the knowledge table: no chat message in between
    assert [r[2] for r in rows] == [PARKING] and "1" in info
    assert "7 entries loaded" in handlers.page_defaults()[0]  # a page opened now counts it


def test_a_load_callback_of_the_background_bot_sees_the_synced_index(config_file, monkeypatch):
    monkeypatch.delenv("KBBOT_MODE", raising=False)
    bot = build_bot(load_settings(config_file), watch_config=True, keep_last_good=True)
    assert bot.index.wait_ready("sparse", 60)
    seen: list[list[str]] = []
    bot.index.on_load(lambda: seen.append([h.entry.query for h in bot.index.searcher("sparse").search(PARKING, 1)]))
    done = cli(config_file, "add", "--file", "faq.json", "--query", PARKING, "--document", "校内停车每小时五元。")
    assert done.returncode == 0, done.stderr
    assert bot.index.refresh(force=True, wait=False)  # the reload and its syncs run on the background workers
    assert bot.index.wait_idle(60)
    # called once, after the sync: what it searched already holds the new entry
    assert seen == [[PARKING]]
