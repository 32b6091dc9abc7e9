"""``python -m bot knowledge …`` in real subprocesses, and every kind of writer at once (nothing lost)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from bot.knowledge.entries import load_entries
from bot.knowledge.files import entry_version
from bot.knowledge.store import ABSENT, KnowledgeStore, StaleEditError
from tests.support.cli import cli_env
from tests.support.cli import knowledge as cli
from tests.support.knowledge import ROOT, TINY, config_dict

pytestmark = pytest.mark.e2e


@pytest.fixture
def config_file(tmp_path, kb_dir):
    """config.yaml with the tiny knowledge base and the state folder in tmp_path."""
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config_dict(tmp_path, kb_dir), allow_unicode=True), encoding="utf-8")
    return path


def read(path: Path):
    """The decoded JSON file."""
    return json.loads(path.read_text(encoding="utf-8"))


def test_add_show_edit_delete(config_file, kb_dir):
    r = cli(config_file, "add", "--file", "faq", "--query", "新问题", "--document", "新答案", "--metadata", "甲,乙")
    assert r.returncode == 0 and "Added faq:1" in r.stdout, r.stderr
    assert read(kb_dir / "faq.json")["1"] == {"query": "新问题", "document": "新答案", "metadata": "甲,乙"}
    r = cli(config_file, "add", "--file", "faq.json", "--key", "add", "--query", "q", "--document", "d")
    assert r.returncode == 2 and "already has an entry 'add'" in r.stderr and not r.stdout
    version = cli(config_file, "show", "faq.json", "add").stdout.splitlines()[0].split()[1]
    r = cli(config_file, "edit", "--file", "faq.json", "--key", "add", "--document", "新文档")
    assert r.returncode == 0 and f"version {version} →" in r.stdout, r.stderr
    assert read(kb_dir / "faq.json")["add"] == dict(TINY["add"], document="新文档")  # other fields kept
    r = cli(config_file, "edit", "--file", "faq.json", "--key", "add", "--query", "x", "--expected-version", version)
    assert r.returncode == 2 and r.stderr.startswith("错误 / error: 该条目已被他人修改")
    assert read(kb_dir / "faq.json")["add"]["query"] == TINY["add"]["query"]
    r = cli(config_file, "delete", "faq.json:mode")
    assert r.returncode == 0 and "Deleted faq:mode" in r.stdout and "mode" not in read(kb_dir / "faq.json")
    for bad in (["delete", "faq:mode"], ["delete", "nocolon"], ["edit", "--file", "../x", "--key", "a"]):
        r = cli(config_file, *bad)
        assert r.returncode == 2 and r.stderr.startswith("错误 / error:"), (bad, r.stderr)


def test_add_and_edit_take_other_phrasings(config_file, kb_dir):
    r = cli(config_file, "add", "--file", "faq", "--query", "停车场怎么收费？", "--document", "五元。",
            "--questions", "停车多少钱 | 停车费", "--questions", "车位收费")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert read(kb_dir / "faq.json")["1"]["questions"] == ["停车多少钱", "停车费", "车位收费"]
    r = cli(config_file, "edit", "--file", "faq", "--key", "1", "--document", "每小时五元。")
    assert r.returncode == 0 and read(kb_dir / "faq.json")["1"]["questions"] == ["停车多少钱", "停车费", "车位收费"]
    r = cli(config_file, "edit", "--file", "faq", "--key", "1", "--questions", "停车贵吗")
    assert r.returncode == 0 and read(kb_dir / "faq.json")["1"]["questions"] == ["停车贵吗"]


def test_import_history_restore(config_file, kb_dir, tmp_path):
    original = (kb_dir / "faq.json").read_bytes()
    upload = tmp_path / "faq.json"
    upload.write_text('[{"query": "only", "document": "one"}]', encoding="utf-8")
    r = cli(config_file, "import", str(upload))
    assert r.returncode == 2 and "already exists" in r.stderr
    r = cli(config_file, "import", str(upload), "--overwrite")
    assert r.returncode == 0 and "overwrote" in r.stdout and "1 entries" in r.stdout, r.stderr
    assert read(kb_dir / "faq.json") == [{"query": "only", "document": "one"}]  # 6 entries → 1 ...
    r = cli(config_file, "history", "faq.json")
    rows = [line.split("\t") for line in r.stdout.splitlines()[1:]]
    assert len(rows) == 1 and rows[0][2] == str(len(TINY))  # ... but the 6 are kept
    r = cli(config_file, "restore", "faq.json", rows[0][0])
    assert r.returncode == 0 and f"{len(TINY)} entries" in r.stdout, r.stderr
    assert (kb_dir / "faq.json").read_bytes() == original
    assert len(cli(config_file, "history", "faq.json").stdout.splitlines()) == 3  # the 1-entry file is kept too
    assert cli(config_file, "restore", "faq.json", "nope").returncode == 2
    r = cli(config_file, "import", str(tmp_path / "missing.json"), "--name", "m.json")
    assert r.returncode == 2 and "cannot read" in r.stderr


EXTERNAL = r"""
import fcntl, json, os, sys, time
folder, lock_path, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
for n in range(rounds):
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for name, change in (("faq.json", "add"), ("counter.json", "count")):
            path = os.path.join(folder, name)
            data = json.load(open(path, encoding="utf-8"))
            if change == "add":
                data[f"ext{n}"] = {"query": f"external {n}", "document": "d"}
            else:
                data["c"]["document"] = str(int(data["c"]["document"]) + 1)
            tmp = os.path.join(folder, f".{name}.ext.tmp")
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(data, fh, ensure_ascii=False)
            os.replace(tmp, path)
    time.sleep(0.01)
"""


def test_threads_cli_and_an_external_script_at_once_lose_nothing(config_file, kb_dir, tmp_path):
    (kb_dir / "counter.json").write_text('{"c": {"query": "counter", "document": "0"}}', encoding="utf-8")
    locks = tmp_path / "state" / "locks"
    locks.mkdir(parents=True)
    script = tmp_path / "external.py"
    script.write_text(EXTERNAL, encoding="utf-8")
    rounds, threads_n, adds, increments = 10, 20, 4, 3
    tally = {"increments": 0, "stale": 0}
    errors: list[BaseException] = []
    guard = threading.Lock()

    def writer(n: int) -> None:
        store = KnowledgeStore(kb_dir, locks, timeout=60)
        try:
            for j in range(adds):
                store.upsert_entry(
                    f"t{n % 3}.json", f"t{n}_{j}", f"thread {n} entry {j}", "d", "", expected_version=ABSENT
                )
            done = 0
            while done < increments:  # optimistic read-modify-write: a stale write is refused and retried
                raw = dict(store.entries("counter.json"))["c"]
                try:
                    store.upsert_entry(
                        "counter.json",
                        "c",
                        "counter",
                        str(int(raw["document"]) + 1),
                        "",
                        # the version of the very record read: a second read could see a newer one than the value
                        expected_version=entry_version(raw),
                    )
                except StaleEditError:
                    with guard:
                        tally["stale"] += 1
                    continue
                done += 1
            with guard:
                tally["increments"] += done
        except Exception as exc:
            errors.append(exc)

    external = subprocess.Popen([sys.executable, str(script), str(kb_dir), str(locks / "knowledge.lock"), str(rounds)])
    clis = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bot",
                "knowledge",
                "add",
                "--file",
                "cli.json",
                "--key",
                f"cli{k}",
                "--query",
                f"from cli {k}",
                "--document",
                "d",
                "--config",
                str(config_file),
            ],
            cwd=ROOT,
            env=cli_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(4)
    ]
    threads = [threading.Thread(target=writer, args=(n,)) for n in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert external.wait(60) == 0
    for p in clis:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    ids = {e.id for e in load_entries(kb_dir)}  # the folder is valid
    expected = (
        {f"faq:{k}" for k in TINY}
        | {f"faq:ext{n}" for n in range(rounds)}
        | {f"cli:cli{k}" for k in range(4)}
        | {f"t{n % 3}:t{n}_{j}" for n in range(threads_n) for j in range(adds)}
    )
    assert expected - ids == set()  # 0 entries lost
    counter = int(read(kb_dir / "counter.json")["c"]["document"])
    assert tally["increments"] == threads_n * increments
    assert counter == tally["increments"] + rounds  # 0 stale overwrites: every increment counted exactly once
