"""Run every benchmark script in benchmarks/ in one go (what `make bench` does).

    .venv/bin/python -m benchmarks.run_all [--only retrieval,speed] [--skip load] [--quick]

A script is any benchmarks/*.py module exposing ``main(argv)`` (helpers such as synth.py or common.py have
none and are not run). Each runs in its own process, so one failing or missing a requirement does not stop the
others; each skips itself cleanly (exit 0 with a message) when ../shared/data or a server it needs is absent.
A script whose import fails for a missing package is reported as skipped with the package's name.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIRST = ("retrieval", "es_vs_tantivy", "speed")  # the order of the issue; others follow alphabetically
QUICK_ARGS = {
    "speed": ["--quick"],
    "load": ["--quick"],
    "log_load": ["--quick"],
    "replicas": ["--quick"],
}  # scripts known to accept a quick flag


def scripts() -> list[str]:
    """Module names under benchmarks/ that define a top-level ``main`` function."""
    found = []
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        if path.stem in ("__init__", "run_all"):
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except SyntaxError:
            found.append(path.stem)  # let it fail visibly when run
            continue
        if any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body):
            found.append(path.stem)
    return sorted(found, key=lambda s: (FIRST.index(s) if s in FIRST else len(FIRST), s))


def missing_requirement(module: str) -> str | None:
    """The name of a package the script cannot import, or None when it imports."""
    probe = (
        f"import importlib, sys\ntry:\n    importlib.import_module('benchmarks.{module}')\n"
        "except ModuleNotFoundError as e:\n    print(e.name); sys.exit(3)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip() or "?" if done.returncode == 3 else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated script names to run (default: all)")
    parser.add_argument("--skip", default="", help="comma-separated script names to leave out")
    parser.add_argument("--quick", action="store_true", help="pass --quick to the scripts that have it")
    args = parser.parse_args(argv)
    only = {s for s in args.only.split(",") if s}
    skip = {s for s in args.skip.split(",") if s}
    todo = [s for s in scripts() if (not only or s in only) and s not in skip]
    summary = []
    for name in todo:
        print(f"\n=== benchmarks.{name} ===", flush=True)
        missing = missing_requirement(name)
        if missing:
            msg = f"skipped: needs the {missing!r} package (pip install -e '.[dense,es,test,bench]')"
            print(msg, flush=True)
            summary.append((name, msg))
            continue
        start = time.perf_counter()
        extra = QUICK_ARGS.get(name, []) if args.quick else []
        code = subprocess.run([sys.executable, "-m", f"benchmarks.{name}", *extra], cwd=ROOT).returncode
        took = time.perf_counter() - start
        summary.append((name, f"{'ok' if code == 0 else f'FAILED (exit {code})'} in {took:.0f} s"))
    print("\n=== summary ===")
    for name, status in summary:
        print(f"{name:16} {status}")
    return 0 if all(not s.startswith("FAILED") for _, s in summary) else 1


if __name__ == "__main__":
    sys.exit(main())
