"""Building the official Elasticsearch client from settings (lazily imported, credentials from the environment)."""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from bot.config.retrieval import ElasticsearchSettings
from bot.errors import SearchBackendError
from bot.optional import optional_import
from bot.texts import SEARCH_DOWN_NOTICE

INSTALL_HINT = "pip install 'kbbot[es]'"
_COMPAT_MIME = re.compile(r"application/vnd\.elasticsearch\+([\w-]+)(\s*;\s*compatible-with=\d+)?")


def _require() -> Any:
    """The elasticsearch package, imported only when this backend is chosen."""
    return optional_import(
        "elasticsearch", "retrieval.sparse.backend 'elasticsearch'", f"run: {INSTALL_HINT}", SearchBackendError
    )


@functools.lru_cache(maxsize=1)
def plain_json_node_class() -> type:
    """A urllib3 node that sends plain application/json, for OpenSearch-compatible servers that reject compat types."""
    _require()
    from elastic_transport import Urllib3HttpNode

    class PlainJsonNode(Urllib3HttpNode):
        """Rewrites application/vnd.elasticsearch+json; compatible-with=N back to application/json."""

        def perform_request(self, method, target, body=None, headers=None, **kwargs):  # type: ignore[override]
            """Send the request with the compat media types replaced by their plain forms."""
            if headers:
                headers = headers.copy()
                for name in ("accept", "content-type"):
                    if name in headers:
                        headers[name] = _COMPAT_MIME.sub(r"application/\1", headers[name])
            return super().perform_request(method, target, body, headers, **kwargs)

    return PlainJsonNode


def build_client(es: ElasticsearchSettings, ca_certs: Path | None = None) -> Any:
    """An Elasticsearch client for ``es`` (``ca_certs``: its CA file, resolved); credentials from the environment."""
    elasticsearch = _require()
    kwargs: dict[str, Any] = dict(es.credentials())
    if ca_certs is not None:
        kwargs["ca_certs"] = str(ca_certs)
    if not es.compat_headers:
        kwargs["node_class"] = plain_json_node_class()
    return elasticsearch.Elasticsearch(
        es.hosts,
        verify_certs=es.verify_certs,
        request_timeout=es.request_timeout,
        max_retries=es.max_retries,
        retry_on_timeout=es.max_retries > 0,
        **kwargs,
    )


@contextlib.contextmanager
def guard(errors: Any, hosts: str, index: str, what: str) -> Iterator[None]:
    """Turn client failures (``errors`` is the elasticsearch package) into SearchBackendError that says what to do."""
    import elastic_transport

    try:
        yield
    except (elastic_transport.ConnectionError, elastic_transport.ConnectionTimeout) as exc:
        tls = " — check verify_certs / ca_certs" if isinstance(exc, elastic_transport.TlsError) else ""
        raise SearchBackendError(
            f"{SEARCH_DOWN_NOTICE} (Elasticsearch at {hosts}, {what}: {type(exc).__name__}{tls})"
        ) from exc
    except errors.AuthenticationException as exc:
        raise SearchBackendError(
            f"Elasticsearch at {hosts} rejected the credentials ({what}); set the variables named by "
            "retrieval.sparse.elasticsearch.api_key_env or username_env/password_env"
        ) from exc
    except errors.NotFoundError as exc:
        raise SearchBackendError(
            f"the Elasticsearch index {index!r} does not exist at {hosts} ({what}); "
            "run `python -m bot index` or restart the app to rebuild it from the knowledge folder"
        ) from exc
    except errors.ApiError as exc:
        raise SearchBackendError(f"Elasticsearch at {hosts} failed to {what}: {exc.meta.status} {exc.message}") from exc


def bulk(
    client: Any,
    index: str,
    actions: Iterable[dict],
    chunk_size: int,
    guarded: contextlib.AbstractContextManager[None],
    what: str,
    progress: Callable[[int], None] | None = None,
) -> None:
    """Send bulk actions in chunks without refreshing, then refresh ``index`` once so they are searchable together;
    a delete of a missing document is no failure, any other rejected action raises SearchBackendError."""
    from elasticsearch import helpers

    failures, pending = [], 0
    with guarded:
        for ok, item in helpers.streaming_bulk(
            client, actions, chunk_size=chunk_size, refresh=False, raise_on_error=False, ignore_status=(404,)
        ):
            if not ok and next(iter(item.values())).get("status") != 404:
                failures.append(item)
            pending += 1
            if progress and pending == 100:
                progress(pending)
                pending = 0
        client.indices.refresh(index=index)
    if progress and pending:
        progress(pending)
    if failures:
        first = "; ".join(str(next(iter(f.values())).get("error")) for f in failures[:3])
        raise SearchBackendError(f"Elasticsearch rejected {len(failures)} document(s) ({what}): {first}")
