"""The server: the knowledge-base chat in the browser and the OpenAI-compatible API at /v1 on one port.

``python -m bot serve [--config PATH] [--host H] [--port P] [--share]`` (``python app.py …`` is the same).
"""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import dataclass
from typing import Any

from bot.chat.routing import Route
from bot.config.settings import DEFAULT_KB, Settings, load_settings
from bot.deployment import Deployment
from bot.errors import BotError
from bot.handoff.desk import Desk
from bot.knowledge_base import KnowledgeBase
from bot.serving.logfilter import limit_repeated_logs
from bot.ui.admin import AdminAuth, AdminBlocks
from bot.ui.guard import ServerGuard


@dataclass(frozen=True)
class Server:
    """Everything one port serves, built by :func:`build_server` and launched by :func:`serve`."""

    page: AdminBlocks  # the default knowledge base's page, at /
    routes: list[Any]  # the API, widget, WeCom, Feishu and admin logins, ahead of Gradio's own routes
    guard: ServerGuard  # the CSP, upload cap, rate and admin checks, and the throttled login
    pages: dict[str, AdminBlocks]  # path -> the page of each other knowledge base (/kb/<name>)
    deployment: Deployment
    desk: Desk | None = None  # the hand-off desk whose notices' worker this server started

    def close(self) -> None:
        """Stop serving (the other pages are mounted on the default page's app and stop with it) and the hand-off
        notices' worker."""
        self.page.close()
        if self.desk is not None:
            self.desk.stop()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options; host and port default to config.yaml's ui section (127.0.0.1:7860)."""
    p = argparse.ArgumentParser(description="知识库问答网页 / Knowledge-base chat in the browser")
    p.add_argument("--config", default="config.yaml")
    p.add_argument("--host", help="address to bind (default from config: 127.0.0.1, this machine only)")
    p.add_argument("--port", type=int, help="port (default from config: 7860)")
    p.add_argument("--share", action="store_true", help="also create a public Gradio share link (off by default)")
    return p.parse_args(argv)


def build_server(settings: Settings, kb: KnowledgeBase | None = None) -> Server:
    """The default knowledge base's page and every route of the server; ``kb``: the default one, when ready.

    The API covers every knowledge base (when ``api.enabled``); the widget, WeCom and Feishu answer from the default
    one; each other knowledge base gets its page at /kb/<name>/ (mounted by :func:`serve`) with its admin login.
    """
    from bot.api import api_router, widget_router
    from bot.api.assets import AssetRoutes
    from bot.ui.pages import admin_routes, kb_page, kb_path, upload_admin
    from bot.ui.publishers import PublisherAuth

    deployment = Deployment(settings, build=serving_knowledge_base, ready={DEFAULT_KB: kb} if kb is not None else None)
    kbs = deployment.start()
    default = kbs[DEFAULT_KB]
    # One publisher login (/publisher/login) for every page: the cookie it signs is the one each page's knowledge tab
    # checks before publishing (knowledge.require_approval).
    publishers = PublisherAuth.publishers(settings) if settings.knowledge.publishers else None
    page = kb_page(default, settings, publishers=publishers)
    pages = {
        kb_path(name): kb_page(kbs[name], deployment.settings[name], name, publishers) for name in deployment.names[1:]
    }
    routes = list(AssetRoutes(kbs).router().routes)  # the pictures and files the documents show
    routes += api_router(deployment, settings).routes if settings.api.enabled else []
    if settings.widget.enabled:  # the embeddable chat widget (docs/widget.md)
        routes += widget_router(default, settings).routes
    if settings.wecom.enabled:  # the WeCom app's message callback (docs/wecom.md)
        from bot.api.wecom import wecom_router

        routes += wecom_router(default, settings).routes
    if settings.feishu.enabled:  # the Feishu app's event subscription (docs/feishu.md)
        from bot.api.feishu import feishu_router

        routes += feishu_router(default, settings).routes
    # the admin login (/admin/login) for the knowledge, inbox and log tabs; while admin is off it says how to turn it on
    routes += page.admin.router().routes
    if publishers is not None:
        routes += publishers.router().routes
    if default.desk is not None:  # the hand-off: the agent console (/agent) and the staff notices' worker
        routes += desk_routes(default.desk, settings, page.admin)
    for path, other in pages.items():  # ahead of the page's mount, which would take /kb/<name>/admin/...
        routes += admin_routes(other, path)
    guard = ServerGuard(settings, may_upload=upload_admin({"/": page, **pages}))
    return Server(page, routes, guard, pages, deployment, default.desk)


def desk_routes(desk: Desk, settings: Settings, admin: AdminAuth) -> list[Any]:
    """The agent console's routes (none when nobody can log in), the desk's outbox started.

    The outbox worker gets every channel this server runs: the webhook, e-mail, and WeCom's or Feishu's when that
    channel is on.
    """
    from bot.handoff.channels import VisitorPushChannel, WeComStaffChannel, configured_channels
    from bot.ui.agents import agent_console

    channels = configured_channels(settings.handoff)
    if settings.wecom.enabled:
        from bot.api.wecom.sender import WeComSender

        sender = WeComSender(settings.wecom)
        push = VisitorPushChannel("wecom", sender)
        channels[push.name] = push
        if settings.handoff.notify.wecom_users:
            channels[WeComStaffChannel.name] = WeComStaffChannel(sender, settings.handoff.notify.wecom_users)
    if settings.feishu.enabled:
        from bot.api.feishu.sender import FeishuSender

        push = VisitorPushChannel("feishu", FeishuSender(settings.feishu))
        channels[push.name] = push
    desk.start_outbox(channels)
    console = agent_console(desk, settings, admin)
    return list(console.router().routes) if console.auth.enabled else []


def serving_knowledge_base(settings: Settings, name: str | None, route: Route | None) -> KnowledgeBase:
    """A knowledge base as a server runs it: following config edits, the last good index kept."""
    from bot.factory import build_knowledge_base

    return build_knowledge_base(settings, name=name, route=route, watch_config=True, keep_last_good=True)


def create_app(config: str = "config.yaml") -> tuple[AdminBlocks, Settings]:
    """The default knowledge base's page and the settings of a config file (the API and the rest: build_server)."""
    settings = load_settings(config)
    return build_server(settings).page, settings


def serve(server: Server, **launch_kwargs: Any) -> Any:
    """Launch the page with the server's routes on the same FastAPI app and port (blocks unless prevent_thread_lock).

    Gradio builds its FastAPI app at launch; ``app_kwargs`` passes our routes to it, ahead of Gradio's own, so
    ``--share``, the login and the queue work as before. (``gr.mount_gradio_app`` + uvicorn would lose ``--share``.)
    """
    from bot.ui.app import CSS
    from bot.ui.pages import mounted

    launch_kwargs = server.guard.launch_options(launch_kwargs)
    app_kwargs = {**launch_kwargs.get("app_kwargs", {}), "routes": list(server.routes)}
    if server.pages:  # the other knowledge bases' pages, with the same login and upload cap
        mounts, app_kwargs["lifespan"] = mounted(server.pages, launch_kwargs)
        app_kwargs["routes"] += mounts
    launch_kwargs["app_kwargs"] = app_kwargs
    return server.page.launch(css=CSS, **launch_kwargs)


def run(settings: Settings, host: str | None = None, port: int | None = None, share: bool = False) -> None:
    """Build the server for ``settings`` and serve it until interrupted (host and port default to ``ui``)."""
    from bot.ui.guard import use_own_upload_folder

    # force: `python -m bot serve` arrives here with the CLI's WARNING handler already on the root logger
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True)
    auth = settings.ui.auth.credentials()  # fail before the slow index build
    limit_repeated_logs(settings.limits.log_repeats_per_minute, max_chars=settings.limits.max_log_chars)
    use_own_upload_folder(settings)  # files a previous run received are deleted
    server = build_server(settings)
    serve(
        server,
        server_name=host or settings.ui.host,
        server_port=port or settings.ui.port,
        share=share,
        auth=auth,
        auth_message="请登录 / Please log in",
    )


def main(argv: list[str] | None = None) -> None:
    """Parse options, build the server and serve it until interrupted."""
    args = parse_args(argv)
    try:
        settings = load_settings(args.config)
    except BotError as exc:
        print(f"错误 / error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    try:
        run(settings, args.host, args.port, args.share)
    except BotError as exc:
        print(f"错误 / error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
