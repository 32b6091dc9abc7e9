"""The Elasticsearch backend against osmem-server (an in-memory ES-API server), plus an opt-in real-cluster run.

The Searcher contract itself runs on osmem-server through ``BUILDERS`` in test_searcher_contract.py; this module
re-runs the same contract tests against a real cluster when ES_URL is set.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
import uuid

import pytest

from bot.config.variants import update
from bot.errors import SearchBackendError
from bot.knowledge.entries import Entry, load_entries
from bot.search.assembly import elasticsearch_searcher, sparse_searcher
from bot.search.es_client import INSTALL_HINT
from bot.search.es_searcher import (
    DOCKER_HINT,
    ElasticsearchSearcher,
    mapping,
)
from bot.search.tantivy_searcher import TantivySearcher
from bot.texts import FALLBACK_NOTICE, SEARCH_DOWN_NOTICE
from tests.support.es_server import (
    FIELD_WEIGHTS,
    RequestLog,
    client_for,
    closed_port,
    index_name,
    port_of,
    shared_server,
    start_server,
)
from tests.support.knowledge import TINY, with_cutoffs, write_knowledge
from tests.support.searchers import QUESTIONS, tantivy_builder

pytestmark = pytest.mark.e2e

ES_URL = os.environ.get("ES_URL", "").strip()


def ids(hits) -> list[str]:
    return [h.entry.id for h in hits]


# -- osmem-server fixtures ---------------------------------------------------
@pytest.fixture
def es_url() -> str:
    return shared_server().url


@pytest.fixture
def client(es_url):
    return client_for(es_url)


@pytest.fixture
def kb(tmp_path) -> list[Entry]:
    return load_entries(write_knowledge(tmp_path / "kb", TINY).parent)


@pytest.fixture
def es(client, tmp_path, tokenizer, kb) -> ElasticsearchSearcher:
    s = ElasticsearchSearcher(client, index_name(tmp_path), tokenizer, FIELD_WEIGHTS)
    s.sync(kb)
    return s


def es_settings(settings, url: str, **overrides):
    """The test settings switched to the Elasticsearch backend at ``url`` (plain-JSON mode for osmem)."""
    block = {
        "hosts": [url],
        "index": f"kbbot-test-{uuid.uuid4().hex[:10]}",
        "compat_headers": False,
        "request_timeout": 2.0,
        **overrides,
    }
    changes = {f"retrieval.sparse.elasticsearch.{key}": value for key, value in block.items()}
    return update(settings, {"retrieval.sparse.backend": "elasticsearch", **changes})


# -- incremental sync ----------------------------------------------------------
def test_resync_sends_exactly_the_changed_document(es, client, kb):
    log = RequestLog(client)
    changed = [dataclasses.replace(e, document=e.document + " 更新。") if e.id == "faq:mode" else e for e in kb]
    report = es.sync(changed)
    assert (report.added, report.updated, report.removed) == (0, 1, 0)
    assert log.bulk_actions() == [("index", "faq:mode")]
    refreshes = [t for m, t, _ in log.calls if t.split("?")[0].endswith("/_refresh")]
    assert len(refreshes) == 1
    assert es.search("切换检索模式", 1)[0].entry.document.endswith("更新。")

    log.clear()
    report = es.sync([e for e in changed if e.id != "faq:canteen"])
    assert report.removed == 1
    assert log.bulk_actions() == [("delete", "faq:canteen")]
    assert "faq:canteen" not in ids(es.search("食堂在哪里", 5))
    assert "faq:canteen" not in es.indexed_hashes()


def test_unchanged_resync_sends_nothing(es, client, kb):
    log = RequestLog(client)
    assert not es.sync(kb).changed
    assert log.bulk_actions() == []


def test_indexed_hashes_pages_through_every_entry(client, tmp_path, tokenizer, kb):
    s = ElasticsearchSearcher(client, index_name(tmp_path), tokenizer, FIELD_WEIGHTS, page_size=4)
    s.sync(kb)
    assert s.indexed_hashes() == {e.id: e.content_hash for e in kb}


@pytest.mark.slow
def test_more_than_ten_thousand_entries(client, tmp_path, tokenizer):
    many = [Entry(f"gen:{i}", f"问题 {i}", f"答案 {i}") for i in range(10_050)]
    s = ElasticsearchSearcher(client, index_name(tmp_path), tokenizer, FIELD_WEIGHTS)
    done: list[int] = []
    s.sync(many, progress=done.append)
    assert sum(done) == len(many)
    hashes = s.indexed_hashes()
    assert hashes is not None and len(hashes) == len(many)


def test_progress_counts_every_entry(client, tmp_path, tokenizer, kb):
    done: list[int] = []
    ElasticsearchSearcher(client, index_name(tmp_path), tokenizer, FIELD_WEIGHTS).sync(kb, progress=done.append)
    assert sum(done) == len(kb)


def test_empty_query_sends_no_request(es, client):
    log = RequestLog(client)
    assert es.search("？！。", 5) == [] and es.search("", 5) == []
    assert log.calls == []


# -- mapping -------------------------------------------------------------------
def test_mapping_mismatch_says_how_to_recreate(client, tmp_path, tokenizer, kb):
    name = index_name(tmp_path)
    client.indices.create(index=name, mappings=mapping("standard", "x"))
    s = ElasticsearchSearcher(client, name, tokenizer, FIELD_WEIGHTS)
    with pytest.raises(SearchBackendError) as err:
        s.sync(kb)
    msg = str(err.value)
    assert "different mapping" in msg and f"curl -X DELETE '{s.hosts}/{name}'" in msg and "python -m bot index" in msg
    s.reset("rebuild requested")  # ours with an old layout: --rebuild may replace it
    assert s.sync(kb).added == len(kb)


def test_foreign_index_is_never_deleted(client, tmp_path, tokenizer):
    name = index_name(tmp_path)
    client.indices.create(index=name, mappings={"properties": {"title": {"type": "text"}}})
    s = ElasticsearchSearcher(client, name, tokenizer, FIELD_WEIGHTS)
    for action in (s.indexed_hashes, lambda: s.reset("x")):
        with pytest.raises(SearchBackendError, match="not created by kbbot"):
            action()
    assert client.indices.exists(index=name)


def test_tokenizer_change_rebuilds_automatically(es, kb, monkeypatch):
    monkeypatch.setattr(es.tokenizer, "signature", lambda: "other-rules")
    report = es.sync(kb)
    assert report.rebuilt and report.added == len(kb)


def test_analyzer_override_sends_raw_text(client, tmp_path, tokenizer, kb):
    # "standard" stands in for ik_max_word/smartcn here: the cluster, not jieba, cuts the text.
    s = ElasticsearchSearcher(client, index_name(tmp_path), tokenizer, FIELD_WEIGHTS, analyzer="standard")
    s.sync(kb)
    stored = client.search(index=s.index, query={"ids": {"values": ["faq:library"]}})["hits"]["hits"][0]["_source"]
    assert stored["entry"]["query"] == "图书馆开放时间"
    # Raw text, each field repeated by its weight (query 3, metadata 2, document 1); jieba would have cut
    # "图书馆开放时间" into "图书馆 开放时间" and dropped the punctuation.
    assert stored["all"].count("图书馆开放时间") == 3 and "，节假日另行通知。" in stored["all"]
    assert ids(s.search("图书馆几点开放？", 1)) == ["faq:library"]


def test_field_weights_repeat_each_fields_jieba_tokens_in_one_field(es, client):
    stored = client.search(index=es.index, query={"ids": {"values": ["faq:canteen"]}})["hits"]["hits"][0]["_source"]
    assert set(stored) == {"id", "hash", "all", "entry"}
    words = stored["all"].split()
    assert words.count("食堂") == 3 + 2 + 1 and words.count("餐饮") == 2 and words.count("体育馆") == 1


def test_coverage_is_the_same_as_tantivys(es, tmp_path, tokenizer, kb):
    tantivy = tantivy_builder(tmp_path, tokenizer)
    tantivy.sync(kb)
    compared = 0
    for question in QUESTIONS:
        # coverage: the engines' BM25 scores differ a little, so does the rank-following relevance built on them
        theirs = {h.entry.id: h.signals["coverage"] for h in tantivy.search(question, 10)}
        ours = {h.entry.id: h.signals["coverage"] for h in es.search(question, 10)}
        assert ours.keys() == theirs.keys(), question
        for entry_id, relevance in ours.items():
            assert relevance == pytest.approx(theirs[entry_id], abs=1e-9), (question, entry_id)
            compared += relevance > 0
    assert compared > 20
    # Still the same after an edit and a removal: both count the entries the knowledge holds now.
    edited = [
        dataclasses.replace(e, document=e.document + " 更新。") if e.id == "faq:canteen" else e
        for e in kb
        if e.id != "faq:library"
    ]
    es.sync(edited)
    tantivy.sync(edited)
    for question in ["食堂 阈值", "图书馆食堂怎么走", *QUESTIONS]:
        assert {h.entry.id: round(h.signals["coverage"], 9) for h in es.search(question, 10)} == {
            h.entry.id: round(h.signals["coverage"], 9) for h in tantivy.search(question, 10)
        }, question


def test_unknown_analyzer_says_to_install_plugin(client, tmp_path, tokenizer, kb):
    s = ElasticsearchSearcher(client, index_name(tmp_path), tokenizer, FIELD_WEIGHTS, analyzer="ik_max_word")
    with pytest.raises(SearchBackendError, match="no analyzer 'ik_max_word'"):
        s.sync(kb)


# -- failures ------------------------------------------------------------------
def test_unreachable_at_start_names_host_and_docker(settings, tokenizer):
    port = closed_port()
    settings = es_settings(settings, f"http://127.0.0.1:{port}")
    with pytest.raises(SearchBackendError) as err:
        elasticsearch_searcher(settings, tokenizer)
    msg = str(err.value)
    assert f"http://127.0.0.1:{port}" in msg and DOCKER_HINT in msg
    assert "discovery.type=single-node" in msg and "xpack.security.enabled=false" in msg


def test_credentials_never_appear_in_errors(settings, monkeypatch, tokenizer):
    monkeypatch.setenv("ES_PASSWORD", "hunter2-secret")
    monkeypatch.setenv("ES_USERNAME", "elastic")
    settings = es_settings(settings, f"http://elastic:url-secret@127.0.0.1:{closed_port()}")
    assert settings.retrieval.sparse.elasticsearch.credentials() == {"basic_auth": ("elastic", "hunter2-secret")}
    with pytest.raises(SearchBackendError) as err:
        elasticsearch_searcher(settings, tokenizer)
    assert "secret" not in str(err.value)


def test_fallback_to_embedded_flags_a_notice(settings, tokenizer, kb):
    settings = es_settings(settings, f"http://127.0.0.1:{closed_port()}", fallback_to_embedded=True)
    s = sparse_searcher(settings, tokenizer)
    assert isinstance(s, TantivySearcher) and s.notice == FALLBACK_NOTICE and "docker run" in (s.fallback_reason or "")
    s.sync(kb)
    assert ids(s.search("怎么添加知识", 1)) == ["faq:add"]


def test_missing_client_package_gives_install_hint(client, tokenizer, monkeypatch):
    monkeypatch.setitem(sys.modules, "elasticsearch", None)
    with pytest.raises(SearchBackendError, match=INSTALL_HINT.replace("[", r"\[").replace("]", r"\]")):
        ElasticsearchSearcher(client, "x", tokenizer, FIELD_WEIGHTS)


def test_cluster_outage_mid_session_then_recovery(tmp_path, tokenizer, kb):
    server = start_server()
    port = port_of(server.url)
    try:
        s = ElasticsearchSearcher(client_for(server.url), index_name(tmp_path), tokenizer, FIELD_WEIGHTS)
        s.sync(kb)
        server.close()
        start = time.perf_counter()
        with pytest.raises(SearchBackendError) as err:
            s.search("怎么添加知识", 3)
        assert str(err.value).startswith(SEARCH_DOWN_NOTICE) and f"127.0.0.1:{port}" in str(err.value)
        assert time.perf_counter() - start < 5
        server = start_server(port)  # same port; osmem keeps nothing in memory across restarts
        with pytest.raises(SearchBackendError, match="does not exist.*python -m bot index"):
            s.search("怎么添加知识", 3)
        # A real cluster comes back with its data; here another client restores it, so the first request the
        # original searcher makes after the outage is a search, proving it kept no broken state.
        ElasticsearchSearcher(client_for(server.url), s.index, tokenizer, FIELD_WEIGHTS).sync(kb)
        assert ids(s.search("怎么添加知识", 3))[0] == "faq:add"
    finally:
        server.close()


# -- end to end ----------------------------------------------------------------
def test_build_bot_answers_through_elasticsearch(settings, es_url):
    from bot.chat.answer import Cutoffs
    from bot.factory import build_bot

    settings = es_settings(settings, es_url)
    settings = with_cutoffs(settings, "sparse", 0.5)
    bot = build_bot(settings, llm=None)
    assert bot.index.searcher("sparse").name == "elasticsearch"
    # No threshold of its own: Elasticsearch's relevance is coverage, as tantivy's, so the sparse one applies.
    assert bot.search.mode_thresholds() == Cutoffs("sparse", 0.5, None)
    answer = bot.answer("怎么添加知识？")
    assert answer.hits and answer.hits[0].entry.id == "faq:add" and answer.hits[0].searcher == "elasticsearch"
    assert answer.hits[0].relevance >= 0.5 and answer.thresholds == Cutoffs("sparse", 0.5, None)
    assert "knowledge 文件夹" in answer.text
    assert bot.retrieve("今天天气怎么样")[1] == []


def test_elasticsearch_threshold_key_is_rejected(tmp_path, kb_dir):
    import yaml

    from bot.config.settings import load_settings
    from bot.errors import ConfigError
    from tests.support.knowledge import config_dict

    raw = config_dict(tmp_path, kb_dir)
    raw["retrieval"]["sparse"].update(backend="elasticsearch", elasticsearch={"threshold": 3.0})
    cfg = tmp_path / "es.yaml"
    cfg.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"retrieval\.sparse\.elasticsearch\.threshold"):
        load_settings(cfg)


def test_bot_says_search_is_down_then_recovers_without_restart(settings):

    from bot.factory import build_bot

    server = start_server()
    port = port_of(server.url)
    try:
        settings = es_settings(settings, server.url)
        settings = with_cutoffs(settings, "sparse", 0.5)
        bot = build_bot(settings, llm=None)
        assert bot.answer("怎么添加知识？").hits[0].entry.id == "faq:add"
        server.close()
        down = bot.answer("怎么添加知识？")
        assert down.text == SEARCH_DOWN_NOTICE and down.notice == SEARCH_DOWN_NOTICE and not down.hits
        assert f"127.0.0.1:{port}" not in down.text  # hosts stay in the log, not on a possibly public page
        server = start_server(port)
        # osmem forgets its data on restart (a real cluster keeps it); re-index as `python -m bot index` would.
        bot.index.sync("sparse")
        back = bot.answer("怎么添加知识？")
        assert back.hits and back.hits[0].entry.id == "faq:add" and back.hits[0].searcher == "elasticsearch"
    finally:
        server.close()


@pytest.mark.slow
def test_cli_answers_through_elasticsearch(settings, es_url, tmp_path):
    import json
    import subprocess
    import sys

    import yaml

    from tests.support.knowledge import ROOT, full_config

    raw = full_config()
    raw["knowledge"]["path"], raw["state_dir"] = settings.knowledge.path, settings.state_dir
    raw["retrieval"]["mode"] = "sparse"
    raw["retrieval"]["thresholds"]["sparse"] = {"answer": 0.5, "direct": None}
    raw["retrieval"]["sparse"].update(
        backend="elasticsearch",
        elasticsearch={"hosts": [es_url], "index": f"kbbot-cli-{uuid.uuid4().hex[:8]}", "compat_headers": False},
    )
    cfg = tmp_path / "es-config.yaml"
    cfg.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "KBBOT_MODE")}
    run = lambda *a: subprocess.run(
        [sys.executable, "-m", "bot", "--config", str(cfg), *a],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    indexed = run("index")
    assert indexed.returncode == 0 and "added 6" in indexed.stdout, indexed.stderr
    out = json.loads(run("ask", "怎么添加知识？", "--json").stdout)
    assert out["hits"][0]["id"] == "faq:add" and out["hits"][0]["searcher"] == "elasticsearch"
    assert out["thresholds"] == {
        "system": "sparse",
        "answer": 0.5,
        "direct": None,
        "clarify": 0.01,  # a file naming the answer cut keeps the shipped clarify, unsure and stand-in
        "confirm": None,
        "unsure": 0.15,
        "stand_in": 0.1,
        "settle": 0.1,
        "settle_dense": None,
        "translated": None,  # sparse offers what only the dictionary found
        "contrast": False,
        "together": None,
    }
    assert out["hits"][0]["relevance"] == 1.0 and out["hits"][0]["signals"]["coverage"] == 1.0
    searched = run("search", "图书馆几点开放")
    # coverage 0.7 is 0.7 of the message's word weight: 几点 is in no entry, so it counts for its content words
    # (0.7 / 0.7 ** 0.5), blended with the two-way match of its question (0.8), less the backward share: 0.819
    assert searched.stdout.splitlines()[0].startswith("✓ 1. 0.819") and "sparse ≥ 0.5" in searched.stdout
