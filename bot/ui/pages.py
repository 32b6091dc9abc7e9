"""The browser app of each knowledge base at its own URL path: the default one at ``/``, another at
``/kb/<name>/`` (its own Blocks, admin login at ``/kb/<name>/admin/login`` and admin cookie).

Gradio builds its FastAPI app when the default page launches (that keeps ``--share``); the other pages are
Gradio apps mounted on it (what ``gr.mount_gradio_app`` does), passed in the launch's routes so they come before
Gradio's own, and their queues started by the launched app's lifespan.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import gradio as gr
from fastapi import APIRouter, FastAPI

from bot.config.settings import Settings
from bot.knowledge_base import KnowledgeBase
from bot.ui.admin import AdminAuth, AdminBlocks
from bot.ui.publishers import PublisherAuth

KB_PREFIX = "/kb"


def kb_path(name: str) -> str:
    """The URL path of knowledge base ``name``'s page (no trailing slash)."""
    return f"{KB_PREFIX}/{name}"


def kb_page(
    kb: KnowledgeBase, settings: Settings, name: str | None = None, publishers: PublisherAuth | None = None
) -> AdminBlocks:
    """The queued Blocks of one knowledge base; with ``name`` (not the default) its admin is scoped to it.

    ``publishers``: the server's publisher logins, shared by every page.
    """
    from bot.ui.app import build_demo

    admin = AdminAuth.from_settings(settings, scope=name, cookie_path=kb_path(name) + "/") if name else None
    demo = build_demo(kb, settings, admin, publishers)
    return demo.queue(default_concurrency_limit=settings.ui.concurrency)


def admin_routes(demo: AdminBlocks, path: str) -> list[Any]:
    """The admin login routes of a page served under ``path``."""
    router = APIRouter(prefix=path)
    router.include_router(demo.admin.router())
    return list(router.routes)


def upload_admin(pages: Mapping[str, AdminBlocks]) -> Callable[[Any], bool]:
    """``allows(request)``: True when the request carries a valid admin cookie of the page it uploads to (the page
    whose path it is under, ``/kb/<name>/…``; else the default's at ``/``): who may upload there."""

    def allows(request: Any) -> bool:
        path = request.url.path
        under = [prefix for prefix in pages if prefix != "/" and path.startswith(prefix.rstrip("/") + "/")]
        return pages[max(under, key=len) if under else "/"].admin.allows(request)

    return allows


def mounted(pages: Mapping[str, AdminBlocks], launch: Mapping[str, Any]) -> tuple[list[Any], Any]:
    """(Mount routes, lifespan) serving each ``path -> Blocks`` of ``pages`` with the launch's login, upload cap
    and CSS; the lifespan starts their queues when the app starts."""
    from bot.ui.app import CSS

    mounts: list[Any] = []
    for path, blocks in pages.items():
        holder = FastAPI()  # mount_gradio_app configures the Blocks and mounts its app; we keep only the mount
        gr.mount_gradio_app(
            holder,
            blocks,
            path,
            auth=launch.get("auth"),
            auth_message=launch.get("auth_message"),
            max_file_size=launch.get("max_file_size"),
            # as the default page: errors reach the log, visitors see only that one happened
            show_error=bool(launch.get("show_error", False)),
            css=CSS,
        )
        mounts.append(holder.router.routes[-1])

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        for blocks in pages.values():
            blocks.run_startup_events()
            await blocks.run_extra_startup_events()
        yield

    return mounts, lifespan
