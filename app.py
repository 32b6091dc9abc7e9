"""Serve the knowledge-base chat in the browser: ``python app.py [--config PATH] [--host H] [--port P]``."""

from __future__ import annotations

import argparse
import logging
import sys

from bot.config.settings import load_settings
from bot.errors import BotError


def parse_args(argv=None) -> argparse.Namespace:
    """Command-line options; host and port default to config.yaml's ui section (127.0.0.1:7860)."""
    p = argparse.ArgumentParser(description="知识库问答网页 / Knowledge-base chat in the browser")
    p.add_argument("--config", default="config.yaml")
    p.add_argument("--host", help="address to bind (default from config: 127.0.0.1, this machine only)")
    p.add_argument("--port", type=int, help="port (default from config: 7860)")
    p.add_argument("--share", action="store_true", help="also create a public Gradio share link (off by default)")
    return p.parse_args(argv)


def create_app(config: str = "config.yaml"):
    """Build the Bot and its Gradio Blocks from a config file; returns (demo, settings)."""
    from bot.factory import build_bot, build_store
    from bot.ui.app import build_demo

    settings = load_settings(config)
    bot = build_bot(settings, watch_config=True)
    demo = build_demo(bot, settings, build_store(settings)).queue(default_concurrency_limit=settings.ui.concurrency)
    return demo, settings


def main(argv=None) -> None:
    """Parse options, build the app and serve it until interrupted."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        auth = load_settings(args.config).ui.auth.credentials()  # fail before the slow index build
        demo, settings = create_app(args.config)
    except BotError as exc:
        print(f"错误 / error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    from bot.ui.app import CSS

    demo.launch(server_name=args.host or settings.ui.host, server_port=args.port or settings.ui.port,
                share=args.share, auth=auth, auth_message="请登录 / Please log in", css=CSS)


if __name__ == "__main__":
    main()
