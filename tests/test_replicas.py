"""Two app processes as replicas behind a load balancer: one search server (the
OpenSearch-compatible osmem-server), one PostgreSQL holding the knowledge, the log and the limits.

An entry added through replica A (the knowledge CLI with A's config) is answered by replica B on its next message,
both replicas' turns land in one table, and a per-client limit counts the messages of both.
"""

from __future__ import annotations

import os
import uuid

import openai
import psycopg
import pytest

from bot.config.variants import update
from tests.support.cli import cli_env, knowledge
from tests.support.es_server import start_server
from tests.support.replicas import Replica, replica_config
from tests.support.serving import TOKEN, ask, kbbot

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

NEW_QUESTION = "独角兽住在哪里？"


@pytest.fixture(params=["osmem", "es-url"])
def search_url(request):
    """The search server both replicas use: an osmem-server, and the real cluster at ES_URL when it is set."""
    if request.param == "es-url":
        url = os.environ.get("ES_URL")
        if not url:
            pytest.skip("set ES_URL=http://localhost:9200 to run the replicas against a real Elasticsearch")
        yield url
        return
    server = start_server()
    yield server.url
    server.close()


def test_two_replicas_share_the_knowledge_the_log_and_the_limits(pg_settings, pg_dsn, tmp_path, search_url):
    shared = update(
        pg_settings,
        {
            "knowledge.shared": "postgres",
            "limits.backend": "postgres",
            "limits.chat_per_minute": 3,
            "retrieval.sparse.backend": "elasticsearch",
            "retrieval.sparse.elasticsearch.hosts": [search_url],
            "retrieval.sparse.elasticsearch.index": f"kbbot-replicas-{uuid.uuid4().hex[:8]}",
            "retrieval.sparse.elasticsearch.compat_headers": False,
        },
    )
    env = {**cli_env(), shared.api.token_env: TOKEN}
    config_a, config_b = (replica_config(shared, tmp_path, name) for name in ("a", "b"))
    replicas = []
    try:
        for name, config in (("a", config_a), ("b", config_b)):
            replicas.append(Replica(name, config, env).wait_ready(TOKEN))
        url_a, url_b = (f"{r.url}/v1" for r in replicas)
        assert kbbot(ask(url_a, "怎么添加知识？"))["sources"][0]["id"] == "faq:add"
        added = knowledge(config_a, "add", "--file", "faq", "--query", NEW_QUESTION, "--document", "彩虹山。")
        assert added.returncode == 0, added.stderr
        reply = ask(url_b, NEW_QUESTION)  # B's next message: the entry A added
        assert kbbot(reply)["sources"][0]["id"] == "faq:1", kbbot(reply)
        assert "彩虹山" in (reply.choices[0].message.content or "")
        ask(url_a, "食堂在哪里？")
        with pytest.raises(openai.RateLimitError):  # the fourth message of this token this minute, on either replica
            ask(url_b, "图书馆开放时间")
        with psycopg.connect(pg_dsn) as conn:
            questions = [row[0] for row in conn.execute("SELECT question FROM turns ORDER BY id")]
        assert questions == ["怎么添加知识？", NEW_QUESTION, "食堂在哪里？"]  # both replicas' turns, one table
    finally:
        for replica in replicas:
            replica.stop()
