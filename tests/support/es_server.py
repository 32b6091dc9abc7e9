"""Test helpers for the Elasticsearch backend: an in-memory osmem-server, clients for it, and a request counter."""

from __future__ import annotations

import atexit
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.ports import free_port

FIELD_WEIGHTS = {"query": 3, "metadata": 2, "document": 1}
SKIP_REASON = "osmem-server is not installed (pip install 'kbbot[test]')"

_shared: list[Any] = []


def osmem_available() -> bool:
    """True when the osmem-server package (and its bundled binary) can be used."""
    try:
        from osmem_server import resolve_binary

        resolve_binary()
    except Exception:
        return False
    return True


def start_server(port: int = 0) -> Any:
    """Start an osmem-server on 127.0.0.1:``port`` (0 = a free port); skips the test when it is not installed."""
    if not osmem_available():
        pytest.skip(SKIP_REASON)
    from osmem_server import OsmemServer

    return OsmemServer.start(japanese=False, addr=f"127.0.0.1:{port}")


def port_of(url: str) -> int:
    """The port of an http://host:port URL."""
    return int(url.rsplit(":", 1)[1].rstrip("/"))


def closed_port() -> int:
    """A port nothing listens on (bound then released)."""
    return free_port()


def shared_server() -> Any:
    """One osmem-server for the whole test process, started on first use (tests use distinct index names)."""
    if not _shared:
        server = start_server()
        atexit.register(server.close)
        _shared.append(server)
    return _shared[0]


def client_for(url: str, **kwargs: Any) -> Any:
    """An Elasticsearch 9.x client that speaks plain JSON, as osmem-server requires; fails fast in tests."""
    from elasticsearch import Elasticsearch

    from bot.search.es_client import plain_json_node_class

    kwargs.setdefault("request_timeout", 2.0)
    kwargs.setdefault("max_retries", 0)
    return Elasticsearch(url, node_class=plain_json_node_class(), **kwargs)


def index_name(path: Path | str) -> str:
    """A valid, per-path index name, so a builder called twice with one path reopens the same index."""
    return "kbbot-test-" + hashlib.sha1(str(path).encode()).hexdigest()[:12]


def contract_builder(path: Path, tokenizer) -> Any:
    """Searcher-contract builder: an ElasticsearchSearcher on the shared osmem-server, one index per test folder."""
    from bot.search.es_searcher import ElasticsearchSearcher

    return ElasticsearchSearcher(client_for(shared_server().url), index_name(path), tokenizer, FIELD_WEIGHTS)


class RequestLog:
    """Counts what a client sends, by wrapping its transport (shared by the client.options() copies bulk helpers make)."""

    def __init__(self, client: Any):
        self.calls: list[tuple[str, str, Any]] = []
        transport = client.transport
        original: Callable[..., Any] = transport.perform_request

        def perform_request(method: str, target: str, **kwargs: Any) -> Any:
            self.calls.append((method, target, kwargs.get("body")))
            return original(method, target, **kwargs)

        transport.perform_request = perform_request

    def bulk_actions(self) -> list[tuple[str, str]]:
        """(op, _id) of every bulk action sent so far."""
        out = []
        for _, target, body in self.calls:
            if target.split("?")[0].endswith("/_bulk"):
                for line in body or []:
                    # the bulk helpers pre-serialise each line to bytes; direct client.bulk calls pass dicts
                    line = json.loads(line) if isinstance(line, (bytes, str)) else line
                    if isinstance(line, dict) and len(line) == 1:
                        ((op, meta),) = line.items()
                        if op in ("index", "create", "update", "delete") and isinstance(meta, dict) and "_id" in meta:
                            out.append((op, meta["_id"]))
        return out

    def clear(self) -> None:
        """Forget the calls recorded so far."""
        self.calls.clear()
