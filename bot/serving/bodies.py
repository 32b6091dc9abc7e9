"""Request bodies read with a cap: a client cannot make a front end buffer more than it will accept."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Protocol


class StreamedRequest(Protocol):
    """What reading a capped body needs of a request (a Starlette ``Request`` is one)."""

    @property
    def headers(self) -> Mapping[str, str]:
        """The request's headers."""
        ...

    def stream(self) -> AsyncIterator[bytes]:
        """The body in pieces as they arrive."""
        ...


async def read_capped(request: StreamedRequest, limit: int) -> bytes | None:
    """The request body, or None past ``limit`` bytes (declared or streamed) without reading the rest."""
    if int(request.headers.get("content-length") or 0) > limit:
        return None
    body = bytearray()
    async for part in request.stream():
        body += part
        if len(body) > limit:
            return None
    return bytes(body)
