"""An LLM's answer shows the pictures of the references it cites: the prompt gives it their text, not their markup."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bot.config.variants import replace
from bot.factory import build_bot
from tests.support.knowledge import TINY, with_cutoffs, write_knowledge

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
MAP = "![校园地图](assets/campus-map.png)"
PICTURED = {
    **TINY,
    "map": {
        "query": "校园地图在哪里看？",
        "document": f"校园地图如下：\n\n{MAP}\n\n也可以下载 [地图 PDF](assets/map.pdf)，或看 ![远程](https://example.org/x.png)。",
        "metadata": "地图,校园",
    },
}


@pytest.fixture
def pictured_bot(llm_settings, llm_server, tmp_path):
    folder = tmp_path / "pictured"
    write_knowledge(folder, PICTURED)
    (folder / "assets").mkdir()
    shutil.copy(ROOT / "knowledge" / "assets" / "campus-map.png", folder / "assets" / "campus-map.png")
    settings = with_cutoffs(replace(llm_settings, "knowledge.path", str(folder)), "sparse", 0.3)
    return build_bot(settings)


def test_a_cited_reference_brings_its_picture_under_the_llm_reply(pictured_bot, llm_server):
    llm_server.reply = lambda body: "校园地图见参考资料 [1]。"
    answer = pictured_bot.answer("校园地图在哪里看？")
    assert answer.llm_used and answer.hits[0].entry.id.endswith("map")
    prompt = llm_server.requests[-1]["body"]["messages"][-1]["content"]
    assert "campus-map.png" not in prompt and "校园地图" in prompt  # the LLM read the alt text, not the markup
    # only our own picture, once: not the PDF link, not the remote picture
    assert answer.text == f"校园地图见参考资料 [1]。\n\n{MAP}"


def test_a_reply_citing_nothing_or_showing_the_picture_gets_none_added(pictured_bot, llm_server):
    llm_server.reply = lambda body: "请到图书馆咨询。"
    assert pictured_bot.answer("校园地图在哪里看？").text == "请到图书馆咨询。"
    llm_server.reply = lambda body: f"见 [1]：{MAP}"
    assert pictured_bot.answer("校园地图在哪里看？").text == f"见 [1]：{MAP}"
    llm_server.reply = lambda body: "见参考资料 [7]。"  # no such reference
    assert pictured_bot.answer("校园地图在哪里看？").text == "见参考资料 [7]。"


def test_a_reference_without_pictures_adds_nothing(pictured_bot, llm_server):
    llm_server.reply = lambda body: "根据参考资料 [1]，放进 knowledge 文件夹即可。"
    answer = pictured_bot.answer("怎么添加知识？")
    assert answer.llm_used and answer.text == "根据参考资料 [1]，放进 knowledge 文件夹即可。"
