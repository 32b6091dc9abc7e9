"""Several knowledge bases in one config: each merged over the top level and checked, each bot answering from its
own knowledge, routing labelled and one hop only, and the CLI's --kb (the served app: test_knowledge_bases_served)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from bot.cli.main import main as cli
from bot.config.knowledge_bases import all_settings, knowledge_base_settings
from bot.config.settings import load_settings
from bot.deployment import Deployment, UnknownKnowledgeBase
from bot.errors import ConfigError
from bot.texts import ROUTED
from tests.support.knowledge_bases import HR_ONLY, NOBODY, QUESTIONS, answered, expected

pytestmark = pytest.mark.unit


def rewrite(config: Path, change) -> Path:
    """``config`` with ``change(raw)`` applied to its data."""
    raw = yaml.safe_load(config.read_text(encoding="utf-8"))
    change(raw)
    config.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return config


def test_each_knowledge_base_is_the_top_level_with_its_overrides(two_kbs):
    config = two_kbs(hr={"retrieval": {"thresholds": {"sparse": {"answer": 0.7}}}, "prompt": {"persona": "人事助手"}})
    top = load_settings(config)
    every = all_settings(top)
    hr = every["hr"]
    assert list(every) == ["default", "hr"] and every["default"] is top
    assert Path(hr.knowledge.path).name == "hr" and hr.prompt.persona == "人事助手"
    assert hr.retrieval.thresholds["sparse"].answer == 0.7 and top.retrieval.thresholds["sparse"].answer == 0.5
    assert hr.retrieval.thresholds["sparse"].direct == top.retrieval.thresholds["sparse"].direct  # merged, not replaced
    assert hr.resolve(hr.state_dir) == top.resolve(top.state_dir) / "kb" / "hr"  # index, log, inbox, history
    assert (hr.ui.admin.username_env, hr.ui.admin.password_env) == ("KBBOT_ADMIN_USER_HR", "KBBOT_ADMIN_PASSWORD_HR")
    assert hr.ui.title == f"{top.ui.title} · 人事处 HR"  # the page says which knowledge base it is
    assert hr.llm == top.llm and hr.knowledge_bases == {}  # the rest is the top level's


def test_a_single_knowledge_base_config_is_unchanged(settings):
    assert all_settings(settings) == {"default": settings}
    kb = Deployment(settings).knowledge_base()
    assert kb.name is None and kb.route is None
    assert kb.ask("图书馆开放时间").knowledge_base is None  # answers carry no name, as before


@pytest.mark.parametrize(
    ("hr", "message"),
    [
        ({"retrieval": {"nonsense": 1}}, "knowledge base 'hr'"),
        ({"retrieval": {"nonsense": 1}}, "retrieval.nonsense"),
        ({"ui": 5}, "  - ui: Input should be a valid dictionary"),
        ({"routing": {"route_to": "payroll"}}, "route_to is 'payroll'"),
        ({"routing": {"route_to": "hr"}}, "name another knowledge base (default)"),
        ({"widget": {"enabled": True}}, "enable it at the top level"),
        ({"log": {"backend": "postgres"}}, "give knowledge_bases.hr.log.postgres.dsn_env its own variable"),
        ({"knowledge": {"shared": "postgres"}}, "give knowledge_bases.hr.log.postgres.dsn_env its own variable"),
    ],
)
def test_a_bad_knowledge_base_is_refused_naming_it(two_kbs, hr, message):
    top = (
        {"log": {"backend": "postgres"}}
        if "log" in hr
        else {"knowledge": {"shared": "postgres"}}
        if "knowledge" in hr
        else {}
    )
    with pytest.raises(ConfigError) as err:
        all_settings(load_settings(two_kbs(hr=hr, **top)))
    assert message in str(err.value)


@pytest.mark.parametrize("name", ["HR", "default", "h r", ""])
def test_a_bad_knowledge_base_name_is_refused(two_kbs, name):
    config = rewrite(two_kbs(), lambda raw: raw.__setitem__("knowledge_bases", {name: {}}))
    with pytest.raises(ConfigError, match="lower-case letters"):
        load_settings(config)


def test_each_bot_answers_from_its_own_knowledge_and_an_unknown_name_lists_the_known(two_kbs):
    deployment = Deployment(load_settings(two_kbs()))
    for name in ("default", "hr"):
        kb = deployment.knowledge_base(name)
        for question in QUESTIONS:
            answer = kb.ask(question)
            assert answered(answer.text, name, question) and answer.knowledge_base == name
    with pytest.raises(UnknownKnowledgeBase, match="choose one of: default, hr"):
        deployment.knowledge_base("payroll")
    with pytest.raises(ConfigError, match="this config has: default, hr"):
        knowledge_base_settings(load_settings(two_kbs()), "payroll")
    with pytest.raises(UnknownKnowledgeBase, match="'payroll'"):  # a ready one for a name the config lacks
        Deployment(load_settings(two_kbs()), ready={"payroll": deployment.knowledge_base("hr")})


def test_routing_asks_the_other_knowledge_base_labelled_and_only_once(two_kbs):
    # each routes to the other: a question neither knows must end in the default's last resort, not loop
    config = two_kbs(hr={"routing": {"label": "人事处 HR", "route_to": "default"}}, routing={"route_to": "hr"})
    deployment = Deployment(load_settings(config))
    routed = deployment.knowledge_base().ask(HR_ONLY)
    label = ROUTED.format(label="人事处 HR")
    assert routed.text.startswith(f"{label}\n\n") and expected("hr", HR_ONLY) in routed.text
    assert label in routed.notices
    assert routed.knowledge_base == "hr" and routed.hits[0].entry.id == "faq:leave"
    own = deployment.knowledge_base().ask(QUESTIONS[0])  # found at home: not routed
    assert answered(own.text, "default", QUESTIONS[0]) and own.knowledge_base == "default"
    nobody = deployment.knowledge_base().ask(NOBODY)
    assert nobody.strategy.value == "last_resort" and nobody.knowledge_base == "default" and label not in nobody.text


@pytest.mark.slow  # ~15 s: each command builds its bots
def test_the_cli_answers_from_the_knowledge_base_of_kb(two_kbs, capsys):
    config = str(two_kbs())
    for kb, flags in (("default", []), ("hr", ["--kb", "hr"])):
        for question in QUESTIONS:
            assert cli(["--config", config, *flags, "ask", question, "--json"]) == 0
            assert answered(json.loads(capsys.readouterr().out)["answer"], kb, question)
    assert cli(["--config", config, "search", QUESTIONS[1], "--kb", "hr", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["hits"][0]["document"] == expected("hr", QUESTIONS[1])
    assert cli(["--config", config, "--kb", "payroll", "ask", QUESTIONS[0]]) == 2
    assert "this config has: default, hr" in capsys.readouterr().err


def test_a_running_knowledge_base_follows_its_own_mode_in_the_config_file(two_kbs):
    from bot.config.watch import ConfiguredMode

    config = two_kbs(hr={"retrieval": {"mode": "sparse"}})
    assert knowledge_base_settings(load_settings(config), "hr").kb_name == "hr"
    default, hr = ConfiguredMode(config, "sparse", check_interval=0), ConfiguredMode(config, "sparse", 0, kb="hr")
    rewrite(config, lambda raw: raw["retrieval"].__setitem__("mode", "dense"))
    assert (default(), hr()) == ("dense", "sparse")  # hr sets its own mode: the top level's edit is not hr's
    rewrite(config, lambda raw: raw["knowledge_bases"]["hr"]["retrieval"].__setitem__("mode", "hybrid"))
    assert (default(), hr()) == ("dense", "hybrid")


def test_calibrating_one_knowledge_base_writes_its_own_thresholds(two_kbs, tmp_path, capsys):
    from tests.support.knowledge_bases import HR

    config = two_kbs()
    rows = [{"question": e["query"], "gold_ids": [key]} for key, e in HR.items()]
    rows += [{"question": q, "gold_ids": [], "kind": "unanswerable"} for q in (NOBODY, "宿舍可以养猫吗", "校训是什么")]
    questions = tmp_path / "hr.jsonl"
    questions.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    top_before = yaml.safe_load(config.read_text(encoding="utf-8"))["retrieval"]
    assert cli(["--config", str(config), "--kb", "hr", "calibrate", "--questions", str(questions), "--write"]) == 0
    wrote = capsys.readouterr().err
    assert "wrote knowledge_bases.hr.retrieval.thresholds.sparse.answer = " in wrote
    chosen = float(wrote.split("thresholds.sparse.answer = ")[1].split(" ")[0])
    raw = yaml.safe_load(config.read_text(encoding="utf-8"))
    assert raw["retrieval"] == top_before  # the default's thresholds are untouched
    assert knowledge_base_settings(load_settings(config), "hr").retrieval.thresholds["sparse"].answer == chosen


def test_a_failing_route_leaves_the_last_resort(two_kbs, caplog):
    from bot.chat.routing import Route

    kb = Deployment(load_settings(two_kbs())).knowledge_base()

    def broken():
        raise RuntimeError("hr's index is gone")

    answer = dataclasses.replace(kb, route=Route("hr", "HR", broken)).ask(HR_ONLY)
    assert answer.strategy.value == "last_resort" and answer.knowledge_base == "default"
    assert "routing to knowledge base 'hr' failed" in caplog.text


def test_the_docs_example_config_loads_and_routes_only_the_default(tmp_path):
    import re
    import textwrap

    from tests.support.knowledge import ROOT, TINY, write_knowledge

    doc = (ROOT / "docs" / "knowledge-bases.md").read_text(encoding="utf-8")
    blocks = [yaml.safe_load(textwrap.dedent(b)) for b in re.findall(r"```yaml\n(.*?)```", doc, re.S)]
    config = yaml.safe_load((ROOT / "config.yaml").read_text(encoding="utf-8"))
    for block in blocks:  # the page's examples put into the shipped config.yaml, as a reader does
        for key, value in block.items():
            config[key] = {**(config.get(key) or {}), **value} if isinstance(value, dict) else value
    assert config["routing"]["route_to"] == "hr" and "hr" in config["knowledge_bases"]
    for folder in ("knowledge", "knowledge-hr"):
        write_knowledge(tmp_path / folder, TINY)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    every = all_settings(load_settings(tmp_path / "config.yaml"))
    assert every["default"].routing.route_to == "hr" and every["hr"].routing.route_to == ""
    assert every["hr"].routing.label == "人事处 / HR"
