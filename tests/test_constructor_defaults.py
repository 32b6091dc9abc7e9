"""One source of defaults: no function in bot/ carries its own literal default for a parameter named like a setting
(the factory passes the configured value; a default kept for tests reads the model: bot.config.base.default_of)."""

from __future__ import annotations

import ast

import pytest

from bot.config.settings import Settings
from tests.support.config_keys import blocks
from tests.support.knowledge import ROOT

pytestmark = pytest.mark.unit

# Named like a setting but not one, or left for now: (module, function, parameter) and why.
NOT_SETTINGS = {
    ("bot/chat/standalone.py", "__init__", "max_tokens"),  # the follow-up rewrite's budget: no such setting
    ("bot/conversations/turn_log.py", "__init__", "timeout"),  # SQLite's busy timeout, not llm.timeout
    ("bot/evaluation/calibration.py", "neighbours", "count"),  # thresholds tried, not fallback.rewrite.count
    ("bot/evaluation/knowledge_check.py", "sample_probes", "seed"),  # sampling seeds, not fastText's
    ("bot/evaluation/questions.py", "subsample", "seed"),
    ("bot/knowledge/csv_io.py", "read_csv", "source"),  # a name for error messages
    ("bot/knowledge/csv_io.py", "read_xlsx", "source"),
    ("bot/knowledge/csv_io.py", "import_csv", "source"),
    ("bot/knowledge/csv_io.py", "import_xlsx", "source"),
    ("bot/search/synonyms.py", "parse_synonyms", "source"),
}


def literal_defaults_in(source: str, names: set[str]):
    """(function, parameter, value) for each literal default in ``source`` of a parameter named in ``names``."""
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        args = node.args
        pairs = list(zip(args.args[len(args.args) - len(args.defaults) :], args.defaults))
        pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
        for arg, default in pairs:
            value = default.value if isinstance(default, ast.Constant) else None
            if arg.arg in names and isinstance(value, (int, float, str)) and not isinstance(value, bool):
                yield node.name, arg.arg, value


def test_no_function_keeps_its_own_default_for_a_setting():
    names = {name for _, model in blocks(Settings) for name in model.model_fields}
    found = {}
    for path in sorted((ROOT / "bot").rglob("*.py")):
        module = path.relative_to(ROOT).as_posix()
        if not module.startswith("bot/config/"):
            for function, parameter, value in literal_defaults_in(path.read_text(encoding="utf-8"), names):
                found[module, function, parameter] = value
    extra = {k: v for k, v in found.items() if k not in NOT_SETTINGS}
    assert not extra, f"literal defaults for configured values (pass the setting, or use default_of): {extra}"
    assert set(found) == NOT_SETTINGS, f"stale NOT_SETTINGS entries: {NOT_SETTINGS - set(found)}"


def test_the_check_sees_literal_defaults_only():
    source = (
        "def f(timeout: float = 30.0, *, max_retries=0, model=None, stream=False, top_k=K, other=1): pass\n"
        "class C:\n    def __init__(self, mode='sparse'): pass\n"
    )
    names = {"timeout", "max_retries", "model", "stream", "top_k", "mode"}
    assert list(literal_defaults_in(source, names)) == [
        ("f", "timeout", 30.0),
        ("f", "max_retries", 0),
        ("__init__", "mode", "sparse"),
    ]
