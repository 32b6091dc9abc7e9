"""The server: the knowledge-base chat in the browser and the OpenAI-compatible API at /v1 on one port.

``python -m bot serve [--config PATH] [--host H] [--port P] [--share]`` (or ``python app.py …``, the same).
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from bot.config.settings import load_settings
from bot.errors import BotError
from bot.logfilter import limit_repeated_logs


def parse_args(argv=None) -> argparse.Namespace:
    """Command-line options; host and port default to config.yaml's ui section (127.0.0.1:7860)."""
    p = argparse.ArgumentParser(description="知识库问答网页 / Knowledge-base chat in the browser")
    p.add_argument("--config", default="config.yaml")
    p.add_argument("--host", help="address to bind (default from config: 127.0.0.1, this machine only)")
    p.add_argument("--port", type=int, help="port (default from config: 7860)")
    p.add_argument("--share", action="store_true", help="also create a public Gradio share link (off by default)")
    return p.parse_args(argv)


def build_server(settings, bot=None):
    """The Gradio Blocks of the default knowledge base and the routes of the rest: the OpenAI-compatible API over
    every knowledge base (when ``api.enabled``), the widget, WeCom and Feishu (the default's), the admin logins, and
    each other knowledge base's page at /kb/<name>/ (mounted by :func:`serve`). ``bot``: the default's, ready."""
    from bot.api import api_router, widget_router
    from bot.config.settings import DEFAULT_KB
    from bot.deployment import Deployment
    from bot.ui.guard import ServerGuard
    from bot.ui.pages import admin_routes, kb_page, kb_path, upload_admin
    from bot.ui.review import publisher_routes

    deployment = Deployment(settings, build=serving_bot, bots={DEFAULT_KB: bot} if bot is not None else None)
    bots = deployment.start()
    bot = bots[DEFAULT_KB]
    demo: Any = kb_page(bot, settings)  # carries what serve() adds below
    pages = {kb_path(name): kb_page(bots[name], deployment.settings[name], name) for name in deployment.names[1:]}
    routes = list(api_router(deployment, settings).routes) if settings.api.enabled else []
    if settings.widget.enabled:  # the embeddable chat widget (docs/widget.md)
        routes += widget_router(bot, settings).routes
    if settings.wecom.enabled:  # the WeCom app's message callback (docs/wecom.md)
        from bot.api.wecom import wecom_router

        routes += wecom_router(bot, settings).routes
    if settings.feishu.enabled:  # the Feishu app's event subscription (docs/feishu.md)
        from bot.api.feishu import feishu_router

        routes += feishu_router(bot, settings).routes
    # the admin login (/admin/login) for the knowledge, inbox and log tabs; while admin is off it says how to turn it on
    routes += demo.admin.router().routes
    routes += publisher_routes(settings)  # /publisher/login when knowledge.publishers lists someone
    if bot.desk is not None:  # the hand-off: the agent console (/agent) and the staff notices' worker
        routes += desk_routes(bot.desk, settings, demo.admin)
    for path, page in pages.items():  # ahead of the page's mount, which would take /kb/<name>/admin/...
        routes += admin_routes(page, path)
    # serve() adds its CSP, upload cap, rate and admin check, and the throttled login, and mounts the other pages
    demo.kb_guard = ServerGuard(settings, may_upload=upload_admin({"/": demo, **pages}))
    demo.kb_pages = pages
    demo.deployment = deployment
    return demo, routes


def desk_routes(desk, settings, admin) -> list[Any]:
    """Start the desk's outbox worker with every channel this server runs (the webhook, e-mail, and WeCom's or
    Feishu's when that channel is on), and return the agent console's routes (none when nobody can log in to it)."""
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


def serving_bot(settings):
    """A knowledge base's Bot as a server runs it: following config edits, the last good index kept."""
    from bot.factory import build_bot

    return build_bot(settings, watch_config=True, keep_last_good=True)


def create_app(config: str = "config.yaml"):
    """Build the Bot and its Gradio Blocks from a config file; returns (demo, settings). With the API: build_server."""
    settings = load_settings(config)
    demo, _ = build_server(settings)
    return demo, settings


def serve(demo, routes, **launch_kwargs):
    """Launch the browser app with the API routes on the same FastAPI app and port (blocks unless prevent_thread_lock).

    Gradio builds its FastAPI app at launch; ``app_kwargs`` passes our routes to it, ahead of Gradio's own, so
    ``--share``, the login and the queue work as before. (``gr.mount_gradio_app`` + uvicorn would lose ``--share``.)
    """
    from bot.ui.app import CSS
    from bot.ui.pages import mounted

    guard = getattr(demo, "kb_guard", None)
    if guard is not None:
        launch_kwargs = guard.launch_options(launch_kwargs)
    app_kwargs = {**launch_kwargs.get("app_kwargs", {}), "routes": list(routes)}
    pages = getattr(demo, "kb_pages", None)
    if pages:  # the other knowledge bases' pages, with the same login and upload cap
        mounts, app_kwargs["lifespan"] = mounted(pages, launch_kwargs)
        app_kwargs["routes"] += mounts
    launch_kwargs["app_kwargs"] = app_kwargs
    return demo.launch(css=CSS, **launch_kwargs)


def main(argv=None) -> None:
    """Parse options, build the app and serve it until interrupted."""
    from bot.ui.guard import use_own_upload_folder

    args = parse_args(argv)
    # force: `python -m bot serve` arrives here with the CLI's WARNING handler already on the root logger
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True)
    try:
        settings = load_settings(args.config)
        auth = settings.ui.auth.credentials()  # fail before the slow index build
        limit_repeated_logs(settings.limits.log_repeats_per_minute, max_chars=settings.limits.max_log_chars)
        use_own_upload_folder(settings)  # files a previous run received are deleted
        demo, routes = build_server(settings)
    except BotError as exc:
        print(f"错误 / error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    serve(
        demo,
        routes,
        server_name=args.host or settings.ui.host,
        server_port=args.port or settings.ui.port,
        share=args.share,
        auth=auth,
        auth_message="请登录 / Please log in",
    )
