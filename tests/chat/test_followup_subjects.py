"""Follow-ups without an LLM put the new subject in the previous question's slot: "那深圳呢？" after
"珠海校区地址是什么？" searches "深圳校区地址是什么？", not both messages together (which found Zhuhai again).

The pairs below are measured through the bot in retrieval-only sparse mode at config.yaml's threshold, on the starter
knowledge and on the campus knowledge in ../shared/data/sysu (read in place; skipped when absent). A pair is right
when the answer's first hit is one of its gold entries. Before (both messages searched together) and after are
printed; run with -s to see them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bot.chat import turn_search as bot_module  # where a turn searches (Bot mixes it in)
from bot.chat.followup import followup_queries, followup_subject
from bot.config.settings import load_settings
from bot.config.variants import update
from bot.factory import build_bot
from tests.support.knowledge import ROOT

pytestmark = pytest.mark.unit

SYSU = ROOT.parent / "shared" / "data" / "sysu"
if not SYSU.exists():  # a worktree sits one level deeper than the main checkout
    SYSU = ROOT.parent.parent / "shared" / "data" / "sysu"

# (previous question, follow-up, gold entry ids)
STARTER = [
    (
        "怎么切换检索模式？",
        "那dense呢？",
        {"kbbot_guide_zh:dense", "kbbot_guide_en:dense", "kbbot_guide_zh:switch_mode"},
    ),
    ("怎么连接 DeepSeek？", "那通义千问呢？", {"kbbot_guide_zh:qwen", "kbbot_guide_en:qwen"}),
    ("怎么接入通义千问？", "那 Ollama 呢？", {"kbbot_guide_zh:ollama", "kbbot_guide_en:local_llm"}),
    ("怎么用 Ollama 本地模型？", "那 vLLM 呢？", {"kbbot_guide_zh:vllm", "kbbot_guide_en:local_llm"}),
    ("大模型报 401 错误怎么办？", "那404呢？", {"kbbot_guide_zh:err_404", "kbbot_guide_en:llm_errors"}),
    ("稀疏检索是什么？", "那混合检索呢？", {"kbbot_guide_zh:hybrid"}),
    ("稀疏检索是什么？", "那稠密检索呢？", {"kbbot_guide_zh:dense"}),
    ("怎么添加知识？", "那删除呢？", {"kbbot_guide_zh:remove_knowledge", "kbbot_guide_en:edit_remove"}),
    ("怎么添加知识？", "那修改呢？", {"kbbot_guide_zh:edit_knowledge", "kbbot_guide_en:edit_remove"}),
    ("HyDE 是什么？", "那兜底回复呢？", {"kbbot_guide_zh:last_resort"}),
    ("怎么修改或关闭 HyDE？", "那问题拆分呢？", {"kbbot_guide_zh:split_config"}),
    ("怎么接入 vLLM 部署的模型？", "那 OpenAI 的呢？", {"kbbot_guide_zh:openai", "kbbot_guide_en:connect_llm"}),
    ("How do I use DeepSeek?", "what about Qwen?", {"kbbot_guide_en:qwen", "kbbot_guide_zh:qwen"}),
    ("What is sparse retrieval?", "and hybrid?", {"kbbot_guide_en:hybrid", "kbbot_guide_zh:hybrid"}),
    ("页面顶部显示的是什么？", "那来源面板呢？", {"kbbot_guide_zh:sources_panel", "kbbot_guide_en:sources_panel"}),
    ("怎么启动网页界面？", "那测试呢？", {"kbbot_guide_zh:tests"}),
]
SYSU_PAIRS = [
    ("中山大学珠海校区地址是什么？", "那深圳呢？", {"29"}),
    ("中山大学珠海校区地址是什么？", "那深圳校区呢？", {"29"}),
    ("南校园地址在哪里？", "那北校园呢？", {"26"}),
    ("北校园的地址是什么", "东校园呢", {"27"}),
    ("中山大学的校训是什么？", "那校歌呢？", {"23", "141"}),
    ("中山大学的校歌是什么", "那校庆日呢", {"24"}),
    ("中山大学的创办人是谁", "那创办时间呢？", {"3"}),
    ("计算机学院有哪些本科专业", "那软件工程学院呢？", {"90"}),
    ("数学学院本科招生专业有哪些", "那物理学院呢", {"58"}),
    ("中山大学广东2023年物理类录取分数线", "那历史类呢？", {"150"}),
    ("中山大学广东2023年物理类录取分数线", "那2022年呢？", {"151"}),
    ("中山大学1924年的历史", "那1925年呢", {"172"}),
    ("南校园有哪些院系", "那东校园呢", {"146"}),
    ("中山大学的医学部有哪些学院", "那工学部呢", {"43", "164"}),
    ("人文社会科学知名人物陈寅恪", "那冯友兰呢", {"207"}),
    ("中山大学的校徽是什么样的", "吉祥物呢", {"139"}),
    ("中山大学的简称是什么", "那外文名呢", {"7"}),
    ("中山大学有多少专职院士", "那本科专业数呢", {"15"}),
    ("中山大学法学院本科招生专业", "那管理学院呢", {"53"}),
    ("中山大学二次遴选博雅学院", "那PPE专业呢", {"156"}),
]


def legacy_queries(previous: str, message: str, answered: bool) -> list[str]:
    """The rule before: both messages searched together, only when the message found nothing on its own."""
    return [] if answered else [f"{previous} {message}"]


def campus_bot(tmp_path: Path, folder: Path, monkeypatch):
    """A retrieval-only sparse bot over ``folder`` read in place, at config.yaml's sparse threshold."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("KBBOT_MODE", raising=False)
    cfg = tmp_path / "config.yaml"
    shutil.copy(ROOT / "config.yaml", cfg)
    settings = load_settings(cfg)
    settings = update(
        settings, {"knowledge.path": str(folder), "state_dir": str(tmp_path / "state"), "retrieval.mode": "sparse"}
    )
    return build_bot(settings)


def right_rate(bot, pairs, stem: str = "") -> tuple[float, list[str]]:
    """Share of pairs whose follow-up's first hit is a gold entry, and the misses."""
    misses = []
    for previous, message, gold in pairs:
        history = [{"role": "user", "content": previous}, {"role": "assistant", "content": "…"}]
        answer = bot.answer(message, history)
        top = answer.hits[0].entry.id if answer.hits else None
        if top not in {f"{stem}{g}" for g in gold}:
            misses.append(f"{previous} + {message} -> {answer.rewritten or message} -> {top}")
    return 1 - len(misses) / len(pairs), misses


def measure(bot, pairs, monkeypatch, stem: str = "") -> tuple[float, float, list[str]]:
    """(rate before, rate after, misses after)."""
    with monkeypatch.context() as m:
        m.setattr(bot_module, "followup_queries", legacy_queries)
        before, _ = right_rate(bot, pairs, stem)
    after, misses = right_rate(bot, pairs, stem)
    return before, after, misses


def test_follow_ups_on_the_starter_knowledge_find_the_new_subject(tmp_path, monkeypatch):
    bot = campus_bot(tmp_path, ROOT / "knowledge", monkeypatch)
    before, after, misses = measure(bot, STARTER, monkeypatch)
    print(f"\nstarter follow-ups right: before {before:.2f}, after {after:.2f} of {len(STARTER)}; misses: {misses}")
    # Measured 0.38 -> 0.88; since the sparse side weighs the number and the kind of answer asked, the legacy
    # queries find two more (0.50 -> 0.88): the follow-up queries still add six of 16.
    assert after >= 0.85 and after >= before + 0.3, misses


@pytest.mark.skipif(not (SYSU / "database.json").is_file(), reason=f"the campus knowledge is not at {SYSU}")
def test_follow_ups_on_the_campus_knowledge_find_the_new_subject(tmp_path, monkeypatch):
    bot = campus_bot(tmp_path, SYSU, monkeypatch)
    before, after, misses = measure(bot, SYSU_PAIRS, monkeypatch, stem="database:")
    print(f"\nsysu follow-ups right: before {before:.2f}, after {after:.2f} of {len(SYSU_PAIRS)}; misses: {misses}")
    # Measured 0.60 -> 0.80; the misses are sparse ranking (北校园地址 -> a canteen), their queries are right.
    assert after >= 0.8 and after >= before + 0.15, misses


@pytest.mark.parametrize(
    "previous, message, query",
    [
        ("珠海校区地址是什么？", "那深圳呢？", "深圳校区地址是什么？"),
        ("广州校区南校园地址在哪", "那珠海校区呢？", "珠海校区南校园地址在哪"),
        ("中山大学广东2023年物理类录取分数线", "那2022年呢", "中山大学广东2022年物理类录取分数线"),
        ("中山大学的医学部", "那工学部呢", "中山大学的工学部"),
        ("中大的校训是什么", "英文的呢", "中大的英文校训是什么"),
        ("怎么切换检索模式？", "那dense呢？", "怎么切换dense检索模式？"),
        ("怎么连接 DeepSeek？", "那通义千问呢", "怎么连接 通义千问？"),
        ("What is sparse retrieval?", "and hybrid?", "What is hybrid retrieval?"),
        ("How do I use DeepSeek?", "what about Qwen?", "How do I use Qwen?"),
    ],
)
def test_the_subject_takes_the_previous_questions_slot(previous, message, query):
    assert followup_queries(previous, message, answered=True) == [query]
    assert followup_queries(previous, message, answered=False) == [query, f"{previous} {message}"]


@pytest.mark.parametrize("message", ["他是谁", "它在哪个区", "那里有图书馆吗", "when was it founded?", "那怎么办呢"])
def test_messages_without_a_subject_of_their_own_are_searched_with_the_previous_question(message):
    assert followup_subject(message) == ""
    assert followup_queries("中山大学的创办人是谁", message, answered=False) == [f"中山大学的创办人是谁 {message}"]
    assert followup_queries("中山大学的创办人是谁", message, answered=True) == []
