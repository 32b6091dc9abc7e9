"""Test sets: uploaded as CSV or eval JSON lines (a bad row names its line, nothing stored), run on the current
knowledge with the numbers `python -m bot eval --json` gives on the same file, a history of runs and the cases
that got better or worse after a knowledge edit; through the core, the CLI and the admin tab's handlers."""

from __future__ import annotations

import json

import pytest
import yaml

from bot.cli.main import main
from bot.errors import ConfigError
from bot.evaluation.testsets import TestSetStore, parse_cases
from bot.factory import build_bot, build_knowledge_base
from bot.ui.testsets_tab import TestSetHandlers
from tests.support.knowledge import with_cutoffs

pytestmark = pytest.mark.unit

CSV = "question,expected\n怎么添加知识？,faq:add\n图书馆几点开门,faq:library\n火星上有几座城市,none\n怎么切换模式,faq:mode\n"


@pytest.fixture
def ts_settings(settings):
    return with_cutoffs(settings, "sparse", 0.5)


def test_bad_rows_name_their_line_and_store_nothing(ts_settings, tmp_path):
    bot = build_bot(ts_settings)
    store = TestSetStore(tmp_path / "ts.sqlite")
    with pytest.raises(ConfigError, match=r"cases\.csv:3: question and expected"):
        store.save("x", "cases.csv", "question,expected\n怎么添加知识？,faq:add\n,faq:mode\n", bot.index.entries)
    with pytest.raises(ConfigError, match="needs the columns question and expected"):
        store.save("x", "cases.csv", "q,a\n1,2\n", bot.index.entries)
    with pytest.raises(ConfigError, match=r"cases\.jsonl:2"):
        store.save("x", "cases.jsonl", '{"question": "q", "gold_ids": ["faq:add"]}\nnot json\n', bot.index.entries)
    assert store.names() == []
    cases = parse_cases(CSV, "cases.csv", bot.index.entries)
    assert [c.kind for c in cases] == ["answerable", "answerable", "unanswerable", "answerable"]


def test_a_run_reports_what_eval_reports_on_the_same_file(ts_settings, tmp_path, capsys):
    config = tmp_path / "cfg.yaml"
    config.write_text(
        yaml.safe_dump(ts_settings.model_dump(mode="json", exclude={"base_dir", "source"}), allow_unicode=True),
        encoding="utf-8",
    )
    cases = tmp_path / "cases.csv"
    cases.write_text(CSV, encoding="utf-8")
    assert main(["--config", str(config), "testset", "add", "smoke", str(cases)]) == 0
    assert main(["--config", str(config), "testset", "run", "smoke", "--json"]) == 0
    ran = json.loads(capsys.readouterr().out.split("\n", 1)[1])["summary"]
    questions = tmp_path / "cases.jsonl"
    bot = build_bot(ts_settings)
    questions.write_text(
        "\n".join(
            json.dumps({"id": str(c.id), "question": c.question, "gold_ids": sorted(c.gold), "kind": c.kind})
            for c in parse_cases(CSV, "cases.csv", bot.index.entries)
        ),
        encoding="utf-8",
    )
    assert main(["--config", str(config), "eval", "--questions", str(questions), "--json"]) == 0
    (mode,) = json.loads(capsys.readouterr().out)["modes"]
    assert ran["recall"]["1"] == mode["recall"]["1"] and ran["recall"]["3"] == mode["recall"]["3"]
    assert ran["wrong_per_100"] == mode["wrong_per_100"] and ran["decision_f1"] == mode["decision_f1"]
    assert ran["decisions"] == mode["decisions"]


def test_history_and_the_cases_that_changed_after_an_edit(ts_settings):
    bot = build_bot(ts_settings)
    kb = build_knowledge_base(ts_settings, bot)
    handlers = TestSetHandlers(build_knowledge_base(ts_settings, bot), ts_settings)
    path = ts_settings.resolve(ts_settings.state_dir) / "upload.csv"
    path.write_text(CSV, encoding="utf-8")
    status, _ = handlers.save(str(path), "smoke")
    assert "4 questions" in status
    first, _ = handlers.run("smoke")
    assert "recall@1" in first and "<ul class='kb-better'><li>—</li>" in first
    editor = kb.editor
    fields = editor.entry("faq.json", "library")
    assert fields is not None
    editor.save("faq.json", "library", "图书馆几点开门", fields.document, fields.metadata)  # fixes one case
    editor.delete("faq.json", "mode")  # breaks another
    second, history = handlers.run("smoke")
    better = second.split("kb-better'>")[1].split("</ul>")[0]
    worse = second.split("kb-worse'>")[1].split("</ul>")[0]
    assert "怎么切换模式" in worse and "怎么切换模式" not in better
    assert history.count("<tr>") == 3  # header + two runs
    assert "phrasings retrieve their own entry first" in handlers.self_check()
    assert "entries ·" in handlers.lint()
