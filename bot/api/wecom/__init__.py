"""The WeCom (企业微信) channel: a self-built app's message callback in safe mode (docs/wecom.md).

``crypto`` signs and encrypts as WXBizMsgCrypt does, ``messages`` reads and writes the callback XML, ``sender`` is
the send API client, ``callback`` the routes. The plain-text answers, each user's short history and the messages
already taken are the IM channels' shared parts (``bot.api.im``). The core owns the turn; this translates.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fastapi import APIRouter

    from bot.config.settings import Settings
    from bot.knowledge_base import KnowledgeBase


def wecom_router(kb: KnowledgeBase, settings: Settings) -> APIRouter:
    """The WeCom callback's routes (``wecom.path``: GET to verify the URL, POST for messages) for one knowledge base."""
    from bot.api.wecom.callback import WeComAPI

    return WeComAPI(kb, settings).router()
