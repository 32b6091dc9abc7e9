"""The Feishu (飞书 / Lark) channel: a self-built app's event subscription, answered through the IM API
(docs/feishu.md).

``crypto`` checks the request signature and decrypts events as Feishu's Encrypt Key scheme does, ``messages`` reads
the event JSON and writes message content, ``seen`` remembers the events taken across restarts, ``sender`` is the
IM API client, ``callback`` the route. The plain-text answers and each user's short history are the IM channels'
shared parts (``bot.api.im``). The core owns the turn; this translates.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fastapi import APIRouter

    from bot.config.settings import Settings
    from bot.knowledge_base import KnowledgeBase


def feishu_router(kb: KnowledgeBase, settings: Settings) -> APIRouter:
    """The Feishu event route (``feishu.path``, POST) for one knowledge base."""
    from bot.api.feishu.callback import FeishuAPI

    return FeishuAPI(kb, settings).router()
