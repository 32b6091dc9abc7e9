"""One kbbot index on an Elasticsearch/OpenSearch cluster, for the searchers that keep their data there: its mapping
and kbbot ``_meta``, recreating it (never a foreign index), paging through documents, bulk writes and errors that
name the fix."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from bot.config.settings import ElasticsearchSettings, default_of
from bot.errors import SearchBackendError
from bot.search.es_client import _require, bulk, guard

log = logging.getLogger(__name__)


class ClusterIndex:
    """An index on the cluster that kbbot owns (its mapping carries ``_meta.kbbot``)."""

    def __init__(
        self,
        client: Any,
        index: str,
        hosts: str | None = None,
        shards: int = default_of(ElasticsearchSettings, "shards"),
        replicas: int = default_of(ElasticsearchSettings, "replicas"),
        chunk_size: int = 500,
    ):
        self._errors = _require()
        self.client, self.index, self.hosts = client, index, hosts or "?"
        self.shards, self.replicas, self.chunk_size = shards, replicas, chunk_size

    def guard(self, what: str) -> contextlib.AbstractContextManager[None]:
        """Client failures as SearchBackendError naming the host, the index and the fix."""
        return guard(self._errors, self.hosts, self.index, what)

    def mapping(self) -> tuple[dict, dict] | None:
        """(our _meta, the mapped properties), None when the index is missing; raises when it is not ours."""
        try:
            with self.guard("read the index mapping"):
                resp = self.client.indices.get_mapping(index=self.index)
        except SearchBackendError as exc:
            if isinstance(exc.__cause__, self._errors.NotFoundError):
                return None
            raise
        first: dict[str, Any] = next(iter(resp.body.values()), {})  # the one index's mapping
        found = first.get("mappings", {})
        meta = found.get("_meta", {}).get("kbbot")
        if meta is None:
            raise SearchBackendError(
                f"the Elasticsearch index {self.index!r} at {self.hosts} was not created by kbbot; choose another "
                f"retrieval.sparse.elasticsearch.index, or delete it: curl -X DELETE '{self.hosts.split(', ')[0]}/{self.index}'"
            )
        return meta, found.get("properties", {})

    def recreate(self, reason: str, mappings: dict, settings: dict) -> None:
        """Delete the index if it is ours and create it empty with ``mappings``; a replica that creates it at the
        same moment is no error."""
        log.info("recreating index %s at %s (%s)", self.index, self.hosts, reason)
        if self.mapping() is not None:
            with self.guard("delete the old index"):
                self.client.indices.delete(index=self.index)
        shape = {"number_of_shards": self.shards, "number_of_replicas": self.replicas}
        try:
            with self.guard("create the index"):
                self.client.indices.create(index=self.index, mappings=mappings, settings={**settings, **shape})
        except SearchBackendError as exc:
            if not (isinstance(exc.__cause__, self._errors.BadRequestError) and "already_exists" in str(exc.__cause__)):
                raise

    def scan(self, query: dict, fields: list[str], page_size: int) -> list[dict]:
        """Every document ``query`` selects: its ``fields`` and its ``_id``, paged by the ``unit`` keyword."""
        rows: list[dict] = []
        after = None
        while True:
            with self.guard("read documents"):
                resp = self.client.search(
                    index=self.index,
                    query=query,
                    sort=[{"unit": "asc"}],
                    size=page_size,
                    source=fields,
                    search_after=after,
                    track_total_hits=False,
                )
            page = resp["hits"]["hits"]
            rows.extend({**h["_source"], "_id": h["_id"]} for h in page)
            if len(page) < page_size:
                return rows
            after = page[-1]["sort"]

    def count(self) -> int:
        """How many documents the index holds."""
        with self.guard("count documents"):
            return int(self.client.count(index=self.index)["count"])

    def bulk(self, actions: list[dict], what: str) -> None:
        """Send the actions in bulk, refreshed once at the end."""
        if actions:
            bulk(self.client, self.index, actions, self.chunk_size, self.guard(what), what)
