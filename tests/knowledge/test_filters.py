"""Category filters: entries list ``categories``; a turn, the API, the CLI and the page's two tabs keep to them.

The searcher contract (tests/search/test_searcher_contract.py) checks every backend's filtered ranking; these tests check
that every front end passes the filter down, that nothing outside it is ever shown, and that bad filters get a
clear error.
"""

from __future__ import annotations

import json
import re

import httpx
import pytest
import yaml

from bot.config.variants import replace
from bot.errors import KnowledgeError
from bot.factory import build_bot, build_knowledge_base
from bot.knowledge.entries import load_entries
from bot.knowledge.filters import FilterError, entry_filter, parse_filter
from bot.ui.app import ChatHandlers
from tests.support.cli import run
from tests.support.knowledge import OFFICES, config_dict, with_cutoffs, write_knowledge
from tests.support.serving import TOKEN, client, kbbot

pytestmark = pytest.mark.e2e


@pytest.fixture
def offices(settings, tmp_path):
    folder = tmp_path / "offices"
    write_knowledge(folder, OFFICES)
    settings = replace(settings, "knowledge.path", str(folder))
    settings = with_cutoffs(settings, "sparse", 0.3)
    return settings


def categories(hits) -> list[set[str]]:
    return [set(h.entry.categories) for h in hits]


def test_categories_load_as_a_list_or_a_comma_separated_string(tmp_path):
    entries = {e.id: e for e in load_entries(write_knowledge(tmp_path / "kb", OFFICES).parent)}
    assert entries["faq:undergrad_fee"].categories == ("招生",)
    assert entries["faq:graduate_fee"].categories == ("研究生",)
    assert entries["faq:report_day"].categories == ("招生", "研究生")
    assert entries["faq:hello"].categories == ()


def test_a_categories_value_of_the_wrong_type_names_the_entry(tmp_path):
    write_knowledge(tmp_path / "kb", {"x": {"query": "q", "document": "d", "categories": [1, 2]}})
    with pytest.raises(KnowledgeError, match="'categories' must be a comma-separated string or a list of strings"):
        load_entries(tmp_path / "kb")


def test_categories_change_the_content_hash_only_when_present(tmp_path):
    plain = load_entries(write_knowledge(tmp_path / "a", {"x": {"query": "q", "document": "d"}}).parent)[0]
    tagged = load_entries(
        write_knowledge(tmp_path / "b", {"x": {"query": "q", "document": "d", "categories": ["c"]}}).parent
    )[0]
    empty = load_entries(
        write_knowledge(tmp_path / "c", {"x": {"query": "q", "document": "d", "categories": []}}).parent
    )[0]
    assert plain.content_hash == empty.content_hash != tagged.content_hash


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ([], None),
        ("", None),
        ("招生, IT", {"招生", "IT"}),
        (["招生", "招生"], {"招生"}),
        ({"categories": ["研究生"]}, {"研究生"}),
        ({"categories": None}, None),
    ],
)
def test_filters_parse_from_a_dict_a_list_or_a_string(value, expected):
    within = parse_filter(value)
    assert (within.categories if within else None) == (frozenset(expected) if expected else None)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"tags": ["x"]}, "unknown filter field"),
        ({"categories": [1]}, "must be strings"),
        (42, "filter must be"),
        ([f"c{i}" for i in range(51)], "at most 50"),
    ],
)
def test_a_bad_filter_says_what_to_send(value, message):
    with pytest.raises(FilterError, match=message):
        parse_filter(value)


def test_a_filtered_turn_answers_from_its_category_and_says_so(offices):
    bot = build_bot(offices, llm=None)
    for category, expected in (("招生", "本科生学费"), ("研究生", "研究生学费")):
        answer = bot.answer("学费是多少？", within=entry_filter([category]))
        assert answer.decision.value == "answer" and expected in answer.text, (category, answer.text)
        assert all(category in c for c in categories(answer.hits + answer.candidates))
        assert answer.to_dict()["filter"] == {"categories": [category]}
    assert bot.answer("学费是多少？").to_dict()["filter"] is None


def test_a_filter_that_admits_nothing_relevant_never_shows_another_category(offices):
    bot = build_bot(offices, llm=None)
    answer = bot.answer("校园网怎么连接？", within=entry_filter(["招生"]))
    assert answer.decision.value != "answer" or "SYSU-WiFi" not in answer.text
    offered = {o.id for o in answer.options}
    assert all("招生" in c for c in categories(answer.hits + answer.candidates))
    assert offered <= {h.entry.id for h in answer.candidates}
    nothing = bot.answer("学费是多少？", within=entry_filter(["没有这个分类"]))
    assert nothing.hits == [] and nothing.candidates == [] and nothing.decision.value == "fallback"


def test_the_retrieval_test_tab_and_the_chat_agree_for_the_same_filter(offices):
    bot = build_bot(offices, llm=None)
    handlers = ChatHandlers(build_knowledge_base(offices, bot), offices)
    assert bot.categories() == ["IT", "招生", "研究生"]
    for category, entry in (("招生", "faq:undergrad_fee"), ("研究生", "faq:graduate_fee")):
        table = handlers.retrieval_test("学费是多少？", [category])
        *_, last = handlers.chat("学费是多少？", [], None, {}, [category])
        sources = last[2]
        sparse = table.split("<h4 class='kb-mode'>sparse", 1)[1].split("<h4", 1)[0]
        tab_ids = re.findall(r"<td>(faq:[a-z_]+)</td>", sparse)
        chat_ids = re.findall(r"title='(faq:[a-z_]+)'", sources)
        assert tab_ids[0] == chat_ids[0] == entry, (category, tab_ids, chat_ids)
        other = ({"faq:undergrad_fee", "faq:graduate_fee"} - {entry}).pop()
        assert other not in table + sources
        assert "分类 / Categories:</b> " + category in sources and "分类 / Categories:</b> " + category in table


def test_the_api_keeps_to_the_kbbot_filter_and_echoes_it(offices, serve_api):
    base = serve_api(offices)
    for category, expected in (("招生", "本科生学费"), ("研究生", "研究生学费")):
        reply = client(base).chat.completions.create(
            model="kbbot",
            messages=[{"role": "user", "content": "学费是多少？"}],
            extra_body={"kbbot": {"filter": {"categories": [category]}}},
        )
        extra = kbbot(reply)
        assert expected in (reply.choices[0].message.content or "")
        assert extra["filter"] == {"categories": [category]}
        assert extra["sources"] and all(OFFICES[s["id"].split(":")[1]]["categories"] for s in extra["sources"])
        assert {s["id"] for s in extra["sources"]} & {"faq:undergrad_fee", "faq:graduate_fee"} == {
            "faq:undergrad_fee" if category == "招生" else "faq:graduate_fee"
        }


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"filter": {"tags": ["招生"]}}, "kbbot.filter"),
        ({"filter": 3}, "kbbot.filter"),
        ({"filtre": {}}, "kbbot"),
        ("招生", "kbbot"),
    ],
)
def test_a_bad_api_filter_is_a_400_naming_the_field(offices, serve_api, extra, param):
    base = serve_api(offices)
    body = {"model": "kbbot", "messages": [{"role": "user", "content": "学费是多少？"}], "kbbot": extra}
    response = httpx.post(f"{base}/chat/completions", json=body, headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 400
    assert response.json()["error"]["param"] == param


def test_the_cli_searches_and_asks_within_categories(tmp_path):
    folder = tmp_path / "offices"
    write_knowledge(folder, OFFICES)
    raw = config_dict(tmp_path, folder, sparse=0.3)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    found = run(config, "search", "学费是多少？", "--category", "研究生", "--json")
    assert found.returncode == 0, found.stderr
    data = json.loads(found.stdout)
    assert data["filter"] == {"categories": ["研究生"]}
    assert data["hits"][0]["id"] == "faq:graduate_fee"
    assert "faq:undergrad_fee" not in [h["id"] for h in data["hits"]]
    asked = run(config, "ask", "学费是多少？", "--category", "招生", "--category", "IT")
    assert asked.returncode == 0, asked.stderr
    assert "本科生学费" in asked.stdout and "研究生学费" not in asked.stdout
