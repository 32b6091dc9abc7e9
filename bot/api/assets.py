"""The knowledge's pictures and files, served: ``/kb-assets/<name>`` (``/kb/<kb>/kb-assets/<name>`` for another
knowledge base), each checked on every request (bot/knowledge/assets.py): a name inside the folder, a known kind whose
first bytes match, the size limit. ``/assets/`` itself is Gradio's own.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from starlette.requests import Request  # at run time: FastAPI reads the handlers' annotations
from starlette.responses import Response

from bot.config.settings import DEFAULT_KB
from bot.knowledge.assets import AssetError

if TYPE_CHECKING:
    from fastapi import APIRouter

    from bot.knowledge_base import KnowledgeBase

log = logging.getLogger(__name__)

ASSET_ROUTE = "kb-assets"


def asset_base(kb_name: str | None) -> str:
    """The path under which knowledge base ``kb_name``'s assets are served, ending in ``/``."""
    if kb_name in (None, DEFAULT_KB):
        return f"/{ASSET_ROUTE}/"
    return f"/kb/{kb_name}/{ASSET_ROUTE}/"


def absolute_base(kb_name: str | None, public_url: str | None, request_base: str | None = None) -> str | None:
    """The absolute URL under which ``kb_name``'s assets are served: under ``public_url`` when configured, else the
    address the request came to (``request_base``), else None."""
    root = (public_url or request_base or "").rstrip("/")
    return root + asset_base(kb_name) if root else None


class AssetRoutes:
    """``GET`` (and ``HEAD``) of every knowledge base's assets."""

    def __init__(self, kbs: dict[str, KnowledgeBase]):
        self.kbs = kbs  # knowledge base name -> its front end object

    def router(self) -> APIRouter:
        """The asset routes of every knowledge base."""
        from fastapi import APIRouter

        router = APIRouter()
        for name in self.kbs:
            path = asset_base(name) + "{name:path}"
            router.add_api_route(path, self.handler(name), methods=["GET", "HEAD"], include_in_schema=False)
        return router

    def handler(self, kb_name: str):
        """The route function of one knowledge base's assets."""

        async def serve(request: Request) -> Response:
            return self.serve(kb_name, request.path_params["name"])

        return serve

    def serve(self, kb_name: str, name: str) -> Response:
        """The asset ``name`` as a file response, or 404 (missing, refused: the reason is logged, not told)."""
        from starlette.responses import FileResponse, PlainTextResponse

        try:
            asset = self.kbs[kb_name].assets.find(name)
        except AssetError as exc:
            log.warning("asset refused: %s", exc)
            return PlainTextResponse("not found", status_code=404)
        except OSError:
            return PlainTextResponse("not found", status_code=404)
        disposition = "inline" if asset.image or asset.content_type == "application/pdf" else "attachment"
        return FileResponse(
            asset.path,
            media_type=asset.content_type,
            content_disposition_type=disposition,
            filename=asset.path.name,
            headers={"X-Content-Type-Options": "nosniff", "Cache-Control": "max-age=300"},
        )
