"""Adversarial scenarios as rows of the faults table (benchmarks/faults.py imports :func:`leak_rows`).

Each attack goes to the real app (``app.build_server`` + ``app.serve`` on a loopback port, as ``python app.py``)
or the local test LLM (tests/support/llm_server.py) over HTTP, the outcome is measured, and "as intended" is computed.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from bot.config.variants import replace, update
from tests.support.gradio_http import api_call, queue_call

Row = tuple[str, str, str, bool]  # (name, injected how, observed outcome, as intended)
ADMIN_USER, ADMIN_PASSWORD, TOKEN = "admin", "admin-password-0123", "kbbot-bench-token-0123456789"


def _serve(settings) -> tuple[str, Any]:
    """The real app for ``settings`` on a free loopback port: (base URL, demo)."""
    import socket

    import app

    server = app.build_server(settings)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app.serve(server, server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    return f"http://127.0.0.1:{port}", server.page


def app_rows(make_settings: Callable[[str], Any]) -> dict[int, Row]:
    """Rows 11-19: attacks on one served app (no admin cookie unless said)."""
    from bot.ui.admin import COOKIE

    os.environ.update(KBBOT_ADMIN_USER=ADMIN_USER, KBBOT_ADMIN_PASSWORD=ADMIN_PASSWORD, KBBOT_API_TOKEN=TOKEN)
    os.environ["FORWARDED_ALLOW_IPS"] = "127.0.0.1"  # what uvicorn trusted before the proxy setting
    s = make_settings("leaks")
    kb = Path(s.knowledge.path)
    s = replace(s, "limits.login_failures", 3)
    temp = Path(tempfile.mkdtemp(prefix="kbbot-leaks-tmp-"))
    old_temp = tempfile.tempdir
    tempfile.tempdir, os.environ["GRADIO_TEMP_DIR"] = str(temp), str(temp / "gradio")  # count what lands here
    rows: dict[int, Row] = {}
    base, demo = _serve(s)
    try:
        admin = {"Cookie": f"{COOKIE}={demo.admin.token()}"}
        (kb / "broken.json").write_text('{"oops": {"query": "断', encoding="utf-8")
        api_call(base, "chat", "怎么添加知识？", [], None, {})  # the next message finds the broken file
        hidden = ["faq.json", "broken.json", s.state_dir, str(kb), "page 1 of"]
        config = httpx.get(base + "/config", timeout=30).text
        deps = json.loads(config)["dependencies"]
        leaked = sorted({h for d in deps for h in hidden if h in queue_call(base, d["id"], len(d["inputs"]))})
        in_config = [h for h in hidden if h in config]
        rows[11] = (
            "admin data through page loaders and `/config`",
            f"GET /config and POST /gradio_api/queue/join for each of the {len(deps)} fn_index, no cookie",
            f"admin strings (file names, state path, error text, page line) in /config: {len(in_config)}, "
            f"in event answers: {len(leaked)}",
            not in_config and not leaked,
        )
        loads = [d for d in deps if any(t[1] == "load" for t in d["targets"])]

        def view_and_export() -> None:
            for d in loads:
                queue_call(base, d["id"], len(d["inputs"]), admin)
            api_call(base, "export_csv", headers=admin)

        view_and_export()
        before = sum(1 for p in temp.rglob("*") if p.is_dir())
        for _ in range(50):
            view_and_export()
        grown = sum(1 for p in temp.rglob("*") if p.is_dir()) - before
        rows[12] = (
            "temp-folder growth from page views and exports",
            "50 admin page views (every load event) + 50 CSV exports",
            f"new directories under the temp folder: {grown}",
            grown == 0,
        )
        files = {"files": ("faq.json", b'{"a": {"query": "q", "document": "d"}}')}
        upload = httpx.post(base + "/gradio_api/upload", files=files, timeout=30).status_code
        rows[13] = ("anonymous upload", "POST /gradio_api/upload without a cookie", f"HTTP {upload}", upload == 403)
        codes = [
            httpx.post(
                base + "/admin/login",
                data={"username": ADMIN_USER, "password": f"guess-{n}"},
                headers={"X-Forwarded-For": f"203.0.113.{n + 1}"},
                timeout=30,
            ).status_code
            for n in range(8)
        ]
        rows[14] = (
            "spoofed X-Forwarded-For against the login lockout",
            "8 wrong admin passwords from 127.0.0.1, each with a new X-Forwarded-For (3 failures lock)",
            f"status codes {codes}",
            codes[2:] == [429] * 6,
        )
        v1 = base + "/v1/chat/completions"
        auth = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
        deep = httpx.post(v1, content=b"[" * 100_000 + b"]" * 100_000, headers=auth, timeout=60)
        rows[15] = (
            "100k-deep JSON on /v1",
            "POST /v1/chat/completions with 100,000 nested lists",
            f"HTTP {deep.status_code}, {deep.json().get('error', {}).get('type') if deep.status_code < 500 else ''}",
            deep.status_code == 400,
        )
        body = b'{"model": "kbbot", "messages": [{"role": "user", "content": "hi"}]}'
        started = time.monotonic()
        wrong = [
            httpx.post(v1, content=body, headers={**auth, "Authorization": f"Bearer guess-{n}"}).status_code
            for n in range(300)
        ]
        right = httpx.post(v1, content=body, headers=auth, timeout=60).status_code
        rows[16] = (
            "API token guessing",
            f"300 wrong bearer tokens in {time.monotonic() - started:.1f} s, then the right one",
            f"401 x {wrong.count(401)}, 429 x {wrong.count(429)}; then the right token: HTTP {right}",
            right == 429 and wrong.count(401) < 10,
        )
        cookie = demo.admin.token()
        httpx.get(base + "/admin/logout", headers={"Cookie": f"{COOKIE}={cookie}"}, timeout=30)
        rows[17] = (
            "a copied admin cookie after logout",
            "log out, then use a copy of the same cookie",
            f"copy still an admin: {demo.admin.valid(cookie)}",
            not demo.admin.valid(cookie),
        )
        bad = ["evil\nINFO forged.json", "invoice\u202enosj.json", "/".join(["d"] * 60) + "/x.json"]
        saved = [
            "❌" not in api_call(base, "save_entry", n, "", "停车怎么收费？", "五元。", "", None, headers=admin)[0]
            for n in bad
        ]
        rows[18] = (
            "unsafe file names in saves",
            "save_entry into a name with a newline, one with U+202E, one 60 folders deep",
            f"saved: {sum(saved)}/3; files created: {sum(1 for p in kb.rglob('*.json')) - 2}",
            not any(saved),
        )
        original = (kb / "faq.json").read_bytes()
        api_call(base, "save_entry", "faq.json", "", "停车场怎么收费？", "五元。", "", None, headers=admin)
        kept = api_call(base, "file_versions", "faq.json", headers=admin)[0]["choices"]
        status = api_call(base, "restore_version", "faq.json", kept[0][1], headers=admin)[0]
        same = (kb / "faq.json").read_bytes() == original
        rows[19] = (
            "undoing an overwrite in the page",
            "an admin save adds an entry to faq.json; then the knowledge tab lists and restores the kept version",
            f"versions listed: {len(kept)}; restored: {'Restored' in status}; file byte-identical: {same}",
            same and "Restored" in status,
        )
    finally:
        demo.close()
        tempfile.tempdir = old_temp
        shutil.rmtree(temp, ignore_errors=True)
    return rows


def llm_rows(make_settings: Callable[[str], Any]) -> dict[int, Row]:
    """Rows 20-22: the local test LLM misbehaving."""
    from bot.factory import build_bot
    from bot.texts import LLM_DOWN_NOTICE
    from tests.support.knowledge import with_cutoffs
    from tests.support.llm_server import Fault, LocalLLMServer

    rows: dict[int, Row] = {}
    server = LocalLLMServer().start()
    try:
        s = make_settings("llm")
        os.environ["OPENAI_API_KEY"] = "sk-bench"
        s = update(s, {"llm.base_url": server.url, "llm.model": "local", "llm.max_retries": 0, "llm.timeout": 10})
        server.reply = lambda body: "根据参考资料 [1]，放进 knowledge 文件夹即可。"
        bot = build_bot(s)
        server.fail(Fault(body=b"<html><h1>502 Bad Gateway</h1></html>"))
        a = bot.answer("怎么添加知识？")
        rows[20] = (
            "LLM answers HTTP 200 with an HTML page",
            "the test LLM returns `<html><h1>502 Bad Gateway</h1>` (text/html, 200)",
            f"answer starts with the LLM-down notice: {a.text.startswith(LLM_DOWN_NOTICE)}; llm_used {a.llm_used}",
            a.text.startswith(LLM_DOWN_NOTICE) and not a.llm_used,
        )
        s = replace(s, "fallback.chain", ["rewrite", "hyde", "last_resort"])
        s = replace(s, "retrieval.grading.enabled", True)
        s = with_cutoffs(s, "sparse", 0.5)
        server.piece_size = 4096
        marks = ("Rephrase the question below", "Answer the question below", "Grade how useful each reference")
        big = "很长的回答" * 200_000
        server.reply = lambda body: big if any(m in body["messages"][-1]["content"] for m in marks) else "好 [1]"
        bot = build_bot(s)
        bot.answer("预热")
        cpu = time.process_time()
        a = bot.answer("我想把资料放进机器人")
        cpu = time.process_time() - cpu
        hyde = len(a.hypothetical or "")
        rows[21] = (
            "LLM ignores max_tokens on reused text",
            "rewrite, HyDE and grading replies of 1 M characters each",
            f"turn CPU {cpu:.2f} s; HyDE text {hyde:,} characters (limits.max_step_chars {s.limits.max_step_chars})",
            hyde <= s.limits.max_step_chars and cpu < 2,
        )
        s = update(s, {"fallback.chain": ["hyde", "last_resort"], "retrieval.grading.enabled": False})
        server.piece_size = 4
        server.reply = lambda body: "<think>先想一想参考资料。</think>\n\n根据参考资料 [1]，放进文件夹。"
        server.reasoning = lambda body: "这是另一段思考。" * 100
        a = build_bot(s).answer("怎么添加知识？")
        rows[22] = (
            "reasoning model thinking",
            "`<think>…</think>` in the content and 800 characters of streamed `reasoning_content`",
            f"answer: “{a.text}”",
            "思考" not in a.text and "想一想" not in a.text and a.text.startswith("根据参考资料"),
        )
    finally:
        server.stop()
    return rows


def leak_rows(make_settings: Callable[[str], Any]) -> dict[int, Row]:
    """Every issue-28 row; ``make_settings(name)`` gives fresh settings on a copy of the tiny knowledge."""
    return {**app_rows(make_settings), **llm_rows(make_settings)}
