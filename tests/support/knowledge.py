"""The tiny knowledge base the tests share, writing knowledge files, and settings helpers."""

from __future__ import annotations

import json
from pathlib import Path

from bot.config.settings import CutoffSettings, Settings

ROOT = Path(__file__).resolve().parents[2]

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


def with_cutoffs(settings: Settings, system: str, answer: float, direct: float | None = None) -> Settings:
    """A copy of ``settings`` with one retrieval system's answer and direct thresholds (relevance in [0, 1]), the
    other cutoffs off, and that system's agreement off: the thresholds compare the relevance as retrieval gives it."""
    from bot.config.settings import CutoffSettings

    return with_agreement(with_thresholds(settings, system, CutoffSettings(answer=answer, direct=direct)), system)


def with_agreement(settings: Settings, system: str, **weights: float) -> Settings:
    """A copy of ``settings`` with one retrieval system's agreement weights (none given: agreement off)."""
    from bot.config.base import FrozenDict
    from bot.config.retrieval import AgreementWeights
    from bot.config.variants import replace

    agreement = FrozenDict({**settings.retrieval.agreement, system: AgreementWeights(**weights)})
    return replace(settings, "retrieval.agreement", agreement)


def with_thresholds(settings: Settings, system: str, cutoffs: CutoffSettings) -> Settings:
    """A copy of ``settings`` with one retrieval system's cutoffs replaced (settings are frozen, their thresholds
    too)."""
    from bot.config.base import FrozenDict
    from bot.config.variants import replace

    return replace(settings, "retrieval.thresholds", FrozenDict({**settings.retrieval.thresholds, system: cutoffs}))


def with_fees(settings: Settings, folder: Path) -> Settings:
    """A copy of ``settings`` answering from :data:`FEES` (written to ``folder``), with cut-offs that make
    "学费是多少？" a clarify question between its two entries."""
    from bot.config.variants import replace

    write_knowledge(folder, FEES)
    sparse = settings.retrieval.thresholds["sparse"].model_copy(update={"answer": 0.3, "clarify": 0.05})
    return replace(with_thresholds(settings, "sparse", sparse), "knowledge.path", str(folder))


def shared_by_replicas(settings: Settings, pg_settings: Settings) -> Settings:
    """A copy of ``settings`` with the log and the limits (and the IM channels' memories) in the PostgreSQL
    database of ``pg_settings``, as replicas behind a load balancer share them."""
    from bot.config.variants import update

    shared = {"log.backend": "postgres", "log.postgres": pg_settings.log.postgres, "limits.backend": "postgres"}
    return update(settings, shared)


def full_config() -> dict:
    """The repository's config.yaml with every default filled in, as plain data: tests edit any key of it.

    config.yaml holds only what differs from the defaults, so a test that changes ``raw["retrieval"]["dense"]`` needs
    the blocks the file leaves out.
    """
    from bot.config.settings import load_settings

    return load_settings(ROOT / "config.yaml").model_dump(mode="json")


def config_dict(tmp_path: Path, kb_dir: Path, sparse: float | None = 0.5) -> dict:
    """The repository's config.yaml as a dict (every default filled in), with knowledge and state in temp folders
    and the sparse mode; a pinned ``sparse`` threshold compares relevance as retrieval gives it (agreement off)."""
    raw = full_config()
    raw["knowledge"]["path"], raw["state_dir"] = str(kb_dir), str(tmp_path / "state")
    raw["retrieval"]["mode"] = "sparse"
    if sparse is not None:
        raw["retrieval"]["thresholds"]["sparse"] = {"answer": sparse, "direct": None}
        raw["retrieval"]["agreement"]["sparse"] = {name: 0.0 for name in raw["retrieval"]["agreement"]["sparse"]}
    return raw


# Two offices answer the same question differently; a filter picks whose answer a visitor gets.
OFFICES: dict[str, dict[str, str | list[str]]] = {
    "undergrad_fee": {
        "query": "学费是多少？",
        "document": "本科生学费每年五千元。",
        "metadata": "学费",
        "categories": ["招生"],
    },
    "graduate_fee": {
        "query": "学费是多少？",
        "document": "研究生学费每年八千元。",
        "metadata": "学费,研究生",
        "categories": "研究生",
    },
    "report_day": {"query": "什么时候报到？", "document": "新生九月一日报到。", "categories": ["招生", "研究生"]},
    "wifi": {"query": "校园网怎么连接？", "document": "连接 SYSU-WiFi，用学号登录。", "categories": ["IT"]},
    "password": {"query": "怎么重置密码？", "document": "在统一身份认证页面重置密码。", "categories": ["IT"]},
    "hello": {"query": "学校在哪里？", "document": "学校在广州。"},
}

# Two entries "学费是多少？" matches equally (the ladder asks which one), and one it does not.
FEES = {
    "undergrad": {"query": "本科生学费是多少？", "document": "本科生学费每年五千元。"},
    "graduate": {"query": "研究生学费是多少？", "document": "研究生学费每年八千元。"},
    "wifi": {"query": "校园网怎么连接？", "document": "连接 SYSU-WiFi，用学号登录。"},
}
