"""Request bodies read with a cap: a client cannot make a front end buffer more than it will accept."""

from __future__ import annotations

from starlette.requests import Request


async def read_capped(request: Request, limit: int) -> bytes | None:
    """The request body, or None past ``limit`` bytes (declared or streamed) without reading the rest."""
    if int(request.headers.get("content-length") or 0) > limit:
        return None
    body = bytearray()
    async for part in request.stream():
        body += part
        if len(body) > limit:
            return None
    return bytes(body)
