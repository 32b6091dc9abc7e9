"""Building the official Elasticsearch client from settings (lazily imported, credentials from the environment)."""

from __future__ import annotations

import functools
import re
from typing import Any

from bot.errors import SearchBackendError
from bot.optional import optional_import

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


def build_client(settings: Any, es: Any) -> Any:
    """An Elasticsearch client from settings; credentials only from the environment, never logged."""
    elasticsearch = _require()
    kwargs: dict[str, Any] = dict(es.credentials())
    if es.ca_certs:
        kwargs["ca_certs"] = str(settings.resolve(es.ca_certs))
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
