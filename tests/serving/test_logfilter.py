"""Bounded logging (bot/serving/logfilter.py): per template, per logger and per traceback, and Gradio's printed tracebacks
logged through the filter; a flood of bad requests to the real app writes a bounded number of lines."""

from __future__ import annotations

import io
import logging
import os
import socket
import subprocess
import sys
import time
import traceback
from pathlib import Path

import httpx
import pytest
import yaml

from bot.serving.logfilter import GRADIO_FAILED, GRADIO_MODULES, RepeatFilter, log_gradio_tracebacks
from tests.support.knowledge import ROOT, TINY, config_dict, write_knowledge
from tests.support.ports import free_port

pytestmark = pytest.mark.e2e


@pytest.fixture
def capture():
    """(logger, stream, clock): a non-propagating logger writing to ``stream`` through a RepeatFilter (20 per
    template, 30 per logger, a minute) on a settable clock."""
    clock = [0.0]
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RepeatFilter(per_window=20, window=60, clock=lambda: clock[0], per_logger=30))
    logger = logging.getLogger("kbbot.test.logfilter")
    logger.addHandler(handler)
    logger.propagate = False
    yield logger, stream, clock
    logger.removeHandler(handler)
    logger.propagate = True


def test_only_the_first_record_of_a_template_keeps_its_traceback_the_rest_are_one_line(capture):
    logger, stream, _ = capture
    for n in range(5):
        try:
            raise ValueError(f"bad body {n}\nsecond line")
        except ValueError:
            logger.error("request failed\n", exc_info=True)
    lines = stream.getvalue().splitlines()
    assert stream.getvalue().count("Traceback (most recent call last)") == 1
    assert lines[-4:] == [f"request failed [ValueError: bad body {n}]" for n in range(1, 5)]


def test_pre_formatted_messages_differing_in_numbers_are_one_template(capture):
    logger, stream, _ = capture
    for byte in range(256):
        logger.warning(f"Expected boundary character 45, got {byte} at index 2")
    lines = stream.getvalue().splitlines()
    assert len(lines) == 21 and "suppressed" in lines[-1]


def test_one_logger_is_capped_across_templates_and_says_so_after_the_window(capture):
    logger, stream, clock = capture
    for n in range(100):
        logger.warning(f"unknown file name {chr(0x4E00 + n)}")  # user text in a pre-formatted message
    lines = stream.getvalue().splitlines()
    assert len(lines) == 31 and "further messages from kbbot.test.logfilter suppressed" in lines[-1]
    clock[0] = 61
    logger.warning("later")
    assert "70 messages from kbbot.test.logfilter were suppressed" in stream.getvalue().splitlines()[-1]


def test_a_record_seen_by_a_logger_filter_and_a_handler_filter_is_counted_once():
    repeat = RepeatFilter(per_window=3, window=60)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(repeat)
    logger = logging.getLogger("kbbot.test.logfilter.twice")
    logger.addFilter(repeat)
    logger.addHandler(handler)
    logger.propagate = False
    try:
        for _ in range(3):
            logger.warning("same")
        assert stream.getvalue().splitlines() == ["same"] * 3
    finally:
        logger.removeHandler(handler)
        logger.removeFilter(repeat)


def test_gradio_tracebacks_are_logged_not_printed(monkeypatch, capsys, caplog):
    import importlib

    for name in GRADIO_MODULES:  # restored after the test
        monkeypatch.setattr(importlib.import_module(name), "traceback", traceback)
    assert log_gradio_tracebacks() == list(GRADIO_MODULES)
    assert log_gradio_tracebacks() == list(GRADIO_MODULES)  # idempotent
    import gradio.routes

    with caplog.at_level(logging.ERROR, logger="gradio"):
        try:
            raise KeyError(9999)
        except KeyError:
            gradio.routes.traceback.print_exc()
    assert capsys.readouterr().err == ""
    [record] = [r for r in caplog.records if r.name == "gradio"]
    assert record.getMessage() == GRADIO_FAILED and record.exc_info[0] is KeyError
    assert gradio.routes.traceback.format_exc is traceback.format_exc  # the rest is the real module


# -- a flood of bad requests to the real app -----------------------------------------------------------------------
BAD_REQUESTS = (
    "queue_join_bad_json",
    "queue_join_unknown_fn",
    "queue_join_bad_data",
    "upload_garbage",
    "run_too_few_inputs",
    "run_wrong_types",
    "call_not_a_list",
    "queue_data_unknown_session",
    "not_http",
    "admin_login_garbage",
)


def bad_request(base: str, port: int, kind: str, n: int) -> None:
    """Send one bad request of ``kind`` (a fresh connection each: a 500 closes uvicorn's keep-alive connection)."""
    if kind == "not_http":
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"\x16\x03\x01\x02garbage\r\n\r\n")
            sock.recv(100)
        return
    headers = {"connection": "close"}
    garbage_body = os.urandom(200)
    garbage_headers = {**headers, "content-type": "multipart/form-data; boundary=xyz"}
    send = {
        "queue_join_bad_json": lambda: httpx.post(
            base + "/gradio_api/queue/join",
            content=b"{not json",
            headers={**headers, "content-type": "application/json"},
        ),
        "queue_join_unknown_fn": lambda: httpx.post(
            base + "/gradio_api/queue/join",
            headers=headers,
            json={"data": [1], "fn_index": 9999, "session_hash": f"s{n}"},
        ),
        "queue_join_bad_data": lambda: httpx.post(
            base + "/gradio_api/queue/join",
            headers=headers,
            json={"data": [None, "x"], "fn_index": 0, "session_hash": f"s{n}", "trigger_id": 1},
        ),
        "upload_garbage": lambda: httpx.post(
            base + "/gradio_api/upload", content=garbage_body, headers=garbage_headers
        ),
        "run_too_few_inputs": lambda: httpx.post(base + "/gradio_api/run/chat", json={"data": [1]}, headers=headers),
        "run_wrong_types": lambda: httpx.post(
            base + "/gradio_api/run/chat", headers=headers, json={"data": [{"a": 1}, "not a list", 5, None]}
        ),
        "call_not_a_list": lambda: httpx.post(base + "/gradio_api/call/chat", json={"data": 5}, headers=headers),
        "queue_data_unknown_session": lambda: httpx.get(
            base + "/gradio_api/queue/data", headers=headers, params={"session_hash": f"nobody-{n}"}
        ),
        "admin_login_garbage": lambda: httpx.post(base + "/admin/login", content=garbage_body, headers=garbage_headers),
    }[kind]
    try:
        send()
    except httpx.HTTPError:  # a stream Gradio breaks off mid-response
        pass


def output_lines(folder: Path) -> int:
    return sum(
        len((folder / name).read_text(encoding="utf-8", errors="replace").splitlines())
        for name in ("stdout.txt", "stderr.txt")
    )


@pytest.mark.slow
def test_a_flood_of_bad_requests_to_the_real_app_writes_a_bounded_number_of_lines(tmp_path):
    write_knowledge(tmp_path / "knowledge", TINY)
    raw = config_dict(tmp_path, tmp_path / "knowledge")
    per_minute = raw["limits"]["log_repeats_per_minute"]
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KBBOT_")}
    env.update(KBBOT_ADMIN_USER="admin", KBBOT_ADMIN_PASSWORD="admin-password", PYTHONUNBUFFERED="1")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with open(tmp_path / "stdout.txt", "w") as out, open(tmp_path / "stderr.txt", "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "app.py", "--config", str(cfg), "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=err,
        )
    try:
        for _ in range(300):
            try:
                if httpx.get(base + "/", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.3)
        assert proc.poll() is None, (tmp_path / "stderr.txt").read_text()
        time.sleep(1)
        started = output_lines(tmp_path)

        def flood(total: int) -> int:
            for n in range(total):
                bad_request(base, port, BAD_REQUESTS[n % len(BAD_REQUESTS)], n)
            time.sleep(1.5)  # the queue's last events
            return output_lines(tmp_path)

        flooding = time.monotonic()
        first = flood(300) - started  # 30 of each kind: more than each message's allowance
        again = flood(100) - started - first
        within_the_minute = time.monotonic() - flooding < 55
        log = (tmp_path / "stderr.txt").read_text(encoding="utf-8", errors="replace")
    finally:
        proc.terminate()
        proc.wait(30)
    # Four messages repeat (uvicorn's "Exception in ASGI application" and "Invalid HTTP request", Gradio's failed
    # requests, the multipart parser's warning): each writes at most per_minute lines and a notice, and one
    # traceback (uvicorn's runs to ~80 lines through the middleware stack).
    assert "Traceback" in log and GRADIO_FAILED in log and "suppressed" in log
    assert log.count("Traceback (most recent call last)") <= 4
    assert first <= 4 * (per_minute + 1) + 150, log[-5000:]
    if within_the_minute:  # 100 more bad requests within the same minute: nothing more
        assert again <= 2, log[-3000:]
    else:  # a very slow machine: a new minute, a new allowance
        assert again <= 4 * (per_minute + 1) + 150, log[-5000:]
