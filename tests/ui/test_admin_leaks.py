"""Admin data stays behind the admin login: no page loader answers without the admin cookie, and the
``/config`` every visitor gets holds no entry rows, hit counts, knowledge file names, knowledge errors or state path.
Checked through the raw Gradio HTTP API (``/gradio_api/queue/join`` with every ``fn_index``), as an attacker would."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.support.gradio_http import queue_call
from tests.support.knowledge import write_knowledge
from tests.support.serving import ADMIN_COOKIE as ADMIN
from tests.support.serving import admin_call as call

pytestmark = pytest.mark.e2e

BROKEN = '{"oops": {"query": "断了的条目'  # a knowledge file with a JSON error: its detail is for admins only


def secrets_of(settings, kb_dir) -> list[str]:
    """Strings only an admin may see: file names, the state path, the broken file's error, the table's page line."""
    return ["faq.json", "broken.json", "断了的条目", settings.state_dir, str(kb_dir), "page 1 of"]


def test_no_admin_data_in_config_or_in_any_event_without_the_admin_cookie(settings, kb_dir, serve_app):
    write_knowledge(kb_dir, {"p": {"query": "停车场怎么收费？", "document": "五元。"}}, "parking.json")
    base = serve_app()
    (kb_dir / "broken.json").write_text(BROKEN, encoding="utf-8")
    call(base, "chat", "停车场怎么收费？", [], None, {}, [], None)  # the next message finds the broken file
    config = httpx.get(base + "/config", timeout=30).text
    hidden = [*secrets_of(settings, kb_dir), "parking.json"]
    assert [s for s in hidden if s in config] == []
    deps = json.loads(config)["dependencies"]
    leaked = {}
    for dep in deps:
        answer = queue_call(base, dep["id"], len(dep["inputs"]))
        found = [s for s in hidden if s in answer]
        if found:
            leaked[dep["id"]] = (dep.get("api_name"), found)
    assert leaked == {}
    # The admin gets all of it, from the page's load event: the table, the error detail, the file names.
    loads = [d for d in deps if any(t[1] == "load" for t in d["targets"])]
    as_admin = "".join(queue_call(base, d["id"], len(d["inputs"]), ADMIN) for d in loads)
    assert [
        s for s in ("faq.json", "parking.json", "broken.json", "Unterminated", "page 1 of") if s not in as_admin
    ] == []


def folders(root) -> int:
    """How many directories there are under ``root``, at any depth."""
    return sum(1 for p in root.rglob("*") if p.is_dir())


def test_page_loads_and_exports_do_not_grow_the_temp_folder(settings, serve_app, tmp_path, monkeypatch):
    import tempfile

    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))  # the app runs in this process: its temp files land here
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(temp / "gradio"))
    from bot.ui import downloads

    downloads._folder.cache_clear()  # a folder an earlier test made is outside this test's temp folder
    downloads.template_file.cache_clear()
    base = serve_app()
    loads = [d for d in json.loads(httpx.get(base + "/config", timeout=30).text)["dependencies"] if d["targets"]]
    loads = [d for d in loads if any(t[1] == "load" for t in d["targets"])]

    def page_view_and_export():
        for dep in loads:
            assert "process_completed" in queue_call(base, dep["id"], len(dep["inputs"]), ADMIN)
        assert call(base, "export_csv")[0]["path"].endswith(".csv")

    page_view_and_export()  # the first one makes the folders the process keeps
    before = folders(temp)
    for _ in range(50):
        page_view_and_export()
    assert folders(temp) - before == 0
