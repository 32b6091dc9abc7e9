"""Secrets never leak: API keys and Elasticsearch credentials stay out of logs, errors, the UI and --json output.

Each secret is a unique marker; every surface a user or an operator can see is searched for it. Logging is
captured at DEBUG for every logger (openai, httpx, httpcore, elastic_transport included), because that is
what an operator turns on when something goes wrong.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import traceback
import uuid
from pathlib import Path

import pytest
import yaml

from bot.config.variants import replace, update
from bot.errors import BotError, SearchBackendError
from bot.factory import build_bot, build_knowledge_base, build_llm
from bot.texts import LLM_DOWN_NOTICE
from tests.support.knowledge import ROOT, config_dict, with_cutoffs
from tests.support.llm_server import Fault, LocalLLMServer
from tests.support.ports import free_port
from tests.support.serving import launched

pytestmark = pytest.mark.e2e

OPENAI_KEY = f"sk-SECRET-{uuid.uuid4().hex}"
ES_API_KEY = f"esk-SECRET-{uuid.uuid4().hex}"
ES_USER = f"esuser-SECRET-{uuid.uuid4().hex}"
ES_PASSWORD = f"espw-SECRET-{uuid.uuid4().hex}"
MARKERS = (OPENAI_KEY, ES_API_KEY, ES_USER, ES_PASSWORD)
# Fragments too, so a key that is shortened or wrapped ("sk-SEC...d41f") is still caught.
LIBRARY_LOGGERS = (
    "openai",
    "httpx",
    "httpx2",
    "httpcore",
    "httpcore2",
    "elastic_transport",
    "elasticsearch",
    "urllib3",
)
FRAGMENTS = tuple(m.split("-SECRET-")[1][:12] for m in MARKERS) + tuple(m.split("-SECRET-")[1][-12:] for m in MARKERS)


def assert_clean(*surfaces: object) -> None:
    """No marker (or a 12-character piece of one) in any of the given texts or objects' reprs."""
    for surface in surfaces:
        text = surface if isinstance(surface, str) else repr(surface)
        for secret in MARKERS + FRAGMENTS:
            assert secret not in text, (
                f"secret {secret[:14]}… leaked in: {text[max(0, text.find(secret) - 200) :][:400]}"
            )


def log_surfaces(caplog) -> list[str]:
    """Everything the captured log holds: formatted text, each record's message, args, and traceback."""
    out = [caplog.text]
    for r in caplog.records:
        out.append(r.getMessage())
        out.append(repr(r.args))
        if r.exc_info and r.exc_info[1] is not None:
            out.append("".join(traceback.format_exception(r.exc_info[1])))
    return out


def error_surfaces(exc: BaseException) -> list[str]:
    """The exception as a user or a log would show it: str, repr, and the whole chained traceback."""
    return [str(exc), repr(exc), "".join(traceback.format_exception(exc))]


@pytest.fixture(autouse=True)
def secret_env(monkeypatch):
    """Every secret this project reads from the environment, set to a marker."""
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("ES_API_KEY", ES_API_KEY)
    monkeypatch.setenv("ES_USERNAME", ES_USER)
    monkeypatch.setenv("ES_PASSWORD", ES_PASSWORD)


@pytest.fixture
def debug_logs(caplog):
    """caplog at DEBUG on the root logger, so every library's debug records are kept too."""
    caplog.set_level(logging.DEBUG)
    for name in LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG)
    yield caplog
    for name in LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET)


@pytest.fixture
def secret_settings(settings, llm_server, monkeypatch):
    """Settings with the LLM at the local server; the conftest fixture removed the key, so set it again."""
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    settings = replace(settings, "llm.base_url", llm_server.url)
    settings = replace(settings, "llm.model", "local-test")
    settings = replace(settings, "llm.timeout", 0.5)
    settings = replace(settings, "llm.max_retries", 0)
    settings = with_cutoffs(settings, "sparse", 0.5)
    return settings


def key_reached_the_server(server: LocalLLMServer) -> bool:
    """The marker really was sent as the key, so its absence elsewhere means something."""
    return any(r["headers"].get("authorization") == f"Bearer {OPENAI_KEY}" for r in server.requests)


# -- the Bot in-process, DEBUG logs of every library ----------------------------------
@pytest.mark.parametrize(
    "fault", [None, Fault(status=401), Fault(status=500), Fault(sleep=1.5)], ids=["answer", "401", "500", "timeout"]
)
def test_bot_answers_and_failures_do_not_leak_the_key(secret_settings, llm_server, debug_logs, fault):
    llm = build_llm(secret_settings)
    bot = build_bot(secret_settings, llm=llm)
    assert_clean(repr(llm), vars(bot), vars(bot.search))
    if fault:
        llm_server.fail(fault)
    answer = bot.answer("怎么添加知识？")
    assert key_reached_the_server(llm_server)
    assert answer.llm_used is (fault is None)
    if fault:
        assert answer.text.startswith(LLM_DOWN_NOTICE)
    assert_clean(answer.text, json.dumps(answer.to_dict(), ensure_ascii=False), *log_surfaces(debug_logs))
    assert any(r.name.startswith(("openai", "httpx", "httpcore")) for r in debug_logs.records)  # DEBUG really was on


@pytest.mark.parametrize(
    "fault",
    [Fault(status=401), Fault(status=403), Fault(status=500), Fault(sleep=1.5), None],
    ids=["401", "403", "500", "timeout", "connection-refused"],
)
def test_llm_error_messages_do_not_leak_the_key(secret_settings, llm_server, debug_logs, fault):
    from bot.factory import build_llm

    if fault is None:
        secret_settings = replace(secret_settings, "llm.base_url", f"http://127.0.0.1:{free_port()}/v1")
    else:
        llm_server.fail(fault)
    llm = build_llm(secret_settings)
    assert llm is not None
    with pytest.raises(BotError) as caught:
        llm.complete([{"role": "user", "content": "hi"}])
    assert_clean(*error_surfaces(caught.value), *log_surfaces(debug_logs))


# -- the CLI as a user runs it ---------------------------------------------------------
def write_config(tmp_path: Path, kb_dir: Path, llm_url: str, **sparse) -> Path:
    """A config.yaml for the CLI with the LLM at ``llm_url`` (no retries, short timeout)."""
    raw = config_dict(tmp_path, kb_dir, sparse=0.5)
    raw["retrieval"]["sparse"].update(sparse)
    raw["llm"].update(base_url=llm_url, model="local-test", max_retries=0, timeout=2)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return path


def run_cli(config: Path, *args: str) -> subprocess.CompletedProcess:
    """``python -m bot --config CONFIG ARGS`` with the secret markers in its environment."""
    env = dict(
        os.environ,
        OPENAI_API_KEY=OPENAI_KEY,
        ES_API_KEY=ES_API_KEY,
        ES_USERNAME=ES_USER,
        ES_PASSWORD=ES_PASSWORD,
        OPENAI_LOG="debug",
    )
    env.pop("KBBOT_MODE", None)
    return subprocess.run(
        [sys.executable, "-m", "bot", "--config", str(config), *args],
        check=False,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )


@pytest.mark.slow
@pytest.mark.parametrize("server_state", ["answers", "401", "stopped"])
def test_cli_ask_json_and_verbose_search_do_not_leak(tmp_path, kb_dir, server_state):
    server = LocalLLMServer().start()
    url = server.url
    try:
        if server_state == "401":
            server.fail(*[Fault(status=401)] * 5)
        if server_state == "stopped":
            server.stop()
        config = write_config(tmp_path, kb_dir, url)
        asked = run_cli(config, "-v", "ask", "怎么添加知识？", "--json")
        searched = run_cli(config, "-v", "search", "怎么添加知识")
    finally:
        if server_state != "stopped":
            server.stop()
    assert asked.returncode == 0 and searched.returncode == 0, asked.stderr + searched.stderr
    out = json.loads(asked.stdout)
    assert out["llm_used"] is (server_state == "answers")
    if server_state != "stopped":
        assert key_reached_the_server(server)
    assert_clean(asked.stdout, asked.stderr, searched.stdout, searched.stderr)


@pytest.mark.slow
def test_cli_with_unreachable_elasticsearch_does_not_leak(tmp_path, kb_dir):
    pytest.importorskip("elasticsearch")
    config = write_config(
        tmp_path,
        kb_dir,
        f"http://127.0.0.1:{free_port()}/v1",
        backend="elasticsearch",
        elasticsearch={"hosts": [f"http://127.0.0.1:{free_port()}"], "request_timeout": 1, "max_retries": 0},
    )
    searched = run_cli(config, "-v", "search", "怎么添加知识")
    assert searched.returncode == 1 and "Elasticsearch" in searched.stderr
    assert_clean(searched.stdout, searched.stderr)


# -- Elasticsearch in-process --------------------------------------------------------------
@pytest.mark.parametrize("auth", ["api_key", "basic", "basic_in_url"])
@pytest.mark.parametrize("fallback", [False, True], ids=["raise", "fallback"])
def test_elasticsearch_unreachable_errors_and_logs_do_not_leak(
    settings, tokenizer, monkeypatch, debug_logs, auth, fallback
):
    pytest.importorskip("elasticsearch")
    from bot.search.assembly import elasticsearch_searcher
    from bot.search.es_client import build_client

    port = free_port()
    es_block = "retrieval.sparse.elasticsearch"
    settings = update(
        settings,
        {
            f"{es_block}.hosts": [f"http://127.0.0.1:{port}"],
            f"{es_block}.request_timeout": 1,
            f"{es_block}.max_retries": 1,
            f"{es_block}.fallback_to_embedded": fallback,
            "retrieval.sparse.backend": "elasticsearch",
        },
    )
    if auth != "api_key":
        monkeypatch.delenv("ES_API_KEY")
    if auth == "basic_in_url":  # against the docs, but people do it; the message must still hide it
        monkeypatch.delenv("ES_USERNAME")
        monkeypatch.delenv("ES_PASSWORD")
        settings = replace(settings, f"{es_block}.hosts", [f"http://{ES_USER}:{ES_PASSWORD}@127.0.0.1:{port}"])
    es = settings.retrieval.sparse.elasticsearch
    client = build_client(es)
    headers = client.transport.node_pool.all()[0].config.headers if auth == "basic_in_url" else client._headers
    assert headers  # the credentials really are in play (as an Authorization header)
    if fallback:
        from bot.search.assembly import sparse_searcher
        from bot.search.tantivy_searcher import TantivySearcher

        searcher = sparse_searcher(settings, tokenizer)
        assert isinstance(searcher, TantivySearcher)  # the stand-in for the unreachable Elasticsearch
        assert searcher.notice and "Elasticsearch" in (searcher.fallback_reason or "")
        assert_clean(searcher.notice, searcher.fallback_reason, repr(searcher))
    else:
        with pytest.raises(SearchBackendError) as caught:
            elasticsearch_searcher(settings, tokenizer)
        assert f"127.0.0.1:{port}" in str(caught.value)
        assert_clean(*error_surfaces(caught.value))
    assert_clean(repr(client), *log_surfaces(debug_logs))


# -- the browser app -----------------------------------------------------------------------
@pytest.mark.slow
def test_app_chat_page_and_config_do_not_leak(secret_settings, llm_server, debug_logs):
    import httpx
    from gradio_client import Client

    from bot.ui.app import build_demo

    bot = build_bot(secret_settings)
    demo = build_demo(build_knowledge_base(secret_settings, bot), secret_settings).queue()
    base = launched(demo)
    try:
        client = Client(f"{base}/", verbose=False)
        seen = [repr(client.view_api(print_info=False, return_format="dict"))]
        seen.append(repr(client.predict("怎么添加知识？", [], "sparse", api_name="/chat")))
        llm_server.fail(Fault(status=401))
        failed = client.predict("怎么切换检索模式？", [], "sparse", api_name="/chat")
        assert LLM_DOWN_NOTICE in repr(failed)
        seen.append(repr(failed))
        seen.append(client.predict("怎么添加知识", api_name="/retrieval_test"))
        with httpx.Client(base_url=base, timeout=30) as http:
            for path in ("/", "/config", "/gradio_api/info"):
                response = http.get(path)
                assert response.status_code == 200, path
                seen.append(response.text)
    finally:
        demo.close()
    assert key_reached_the_server(llm_server)
    assert_clean(*seen, *log_surfaces(debug_logs))
