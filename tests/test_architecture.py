"""The folder tree is the architecture: lower layers never import higher ones, and never a front end.

Layers, lowest first. A module may import its own layer and the ones below it, never one above: so the core
(``chat``) cannot reach into the browser page, and the page goes through the core instead of the searchers'
internals. Checked on the import statements of every module, including imports inside functions.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

BOT = Path(__file__).resolve().parents[1] / "bot"
LAYERS = [
    {"bot.errors", "bot.fsutil", "bot.optional", "bot.openai_compat", "bot.texts"},
    {"bot.config"},
    {"bot.knowledge"},
    {"bot.search"},
    {"bot.chat.answer"},  # the result types a turn produces and the conversation log stores
    {"bot.conversations"},
    {"bot.chat"},
    {"bot.factory", "bot.evaluation"},
    {"bot.ui", "bot.api", "bot.cli", "bot.__main__", "bot"},
]
FRONT_END_PACKAGES = {"gradio", "fastapi", "starlette", "uvicorn"}


def layer_of(module: str) -> int:
    """The index in LAYERS of the longest registered prefix of ``module``."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        for i, layer in enumerate(LAYERS):
            if prefix in layer:
                return i
    raise AssertionError(f"{module} is in no layer: add it to LAYERS in tests/test_architecture.py")


def module_name(path: Path) -> str:
    """Dotted module name of a file under bot/."""
    rel = path.relative_to(BOT.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def imports(path: Path) -> set[str]:
    """Every module a file imports, at top level or inside functions."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


MODULES = sorted(p for p in BOT.rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(BOT.parent)))
def test_modules_import_only_their_layer_and_below(path):
    name = module_name(path)
    own = layer_of(name)
    upward = sorted(m for m in imports(path) if m.startswith("bot.") and layer_of(m) > own)
    assert not upward, f"{name} (layer {own}) imports higher layers: {upward}"
    if own < layer_of("bot.ui"):
        front = sorted(m for m in imports(path) if m.split(".")[0] in FRONT_END_PACKAGES)
        assert not front, f"{name} is below the front ends but imports {front}"


def test_the_layer_check_catches_an_upward_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from bot.ui.app import build_demo\n", encoding="utf-8")
    assert "bot.ui.app" in imports(bad) and layer_of("bot.ui.app") > layer_of("bot.search.index")


CONCRETE_BACKENDS = {
    "bot.search.tantivy_searcher",
    "bot.search.es_searcher",
    "bot.search.faiss_searcher",
    "bot.search.hybrid",
}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(BOT.parent)))
def test_only_the_factory_and_the_search_package_name_a_concrete_backend(path):
    name = module_name(path)
    if name == "bot.factory" or name.startswith("bot.search"):
        return
    named = sorted(imports(path) & CONCRETE_BACKENDS)
    assert not named, f"{name} imports {named}: take the role (bot.search.base) and let bot.factory build it"


def test_public_api_names_resolve():
    import bot

    for name in bot.__all__:
        assert getattr(bot, name) is not None, name
    with pytest.raises(AttributeError):
        bot.NoSuchName  # noqa: B018


# -- the tests themselves: shared code lives in tests/support/, fixtures in conftest.py ---------------------------
ROOT = BOT.parent


def imported_test_modules(path: Path) -> list[str]:
    """The test modules (``tests.test_*``) a file imports, however it spells the import."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        found += [".".join(n.split(".")[:2]) for n in names if n.startswith("tests.test_")]
    return sorted(set(found))


def test_no_test_module_or_benchmark_imports_a_test_module():
    files = sorted(p for p in [*(ROOT / "tests").rglob("*.py"), *(ROOT / "benchmarks").glob("*.py")])
    offenders = {str(p.relative_to(ROOT)): imported_test_modules(p) for p in files}
    assert {k: v for k, v in offenders.items() if v} == {}, "move what they share into tests/support/"


def test_the_check_sees_both_spellings_of_importing_a_test_module(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from tests import test_app\nfrom tests.test_api import TOKEN\n", encoding="utf-8")
    assert imported_test_modules(bad) == ["tests.test_api", "tests.test_app"]


def test_conftest_holds_fixtures_only():
    tree = ast.parse((ROOT / "tests" / "conftest.py").read_text(encoding="utf-8"))
    not_fixtures = [
        getattr(node, "name", type(node).__name__)
        for node in tree.body
        if not isinstance(node, (ast.Import, ast.ImportFrom, ast.Expr))
        and not (isinstance(node, ast.FunctionDef) and any("fixture" in ast.unparse(d) for d in node.decorator_list))
    ]
    assert not_fixtures == [], "helpers and constants belong in tests/support/"
