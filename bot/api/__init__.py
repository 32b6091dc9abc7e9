"""An OpenAI-compatible HTTP API (``/v1/models``, ``/v1/chat/completions``) over the Bot, for integrators.

It is served by the same process and port as the browser app (app.py passes the routes to Gradio's FastAPI
app). The model name picks the retrieval mode; the answer's sources come in an extra top-level ``kbbot`` field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fastapi import APIRouter

    from bot.chat.bot import Bot
    from bot.config.settings import Settings
    from bot.deployment import Deployment


def api_router(bot: Bot | Deployment, settings: Settings) -> APIRouter:
    """The API's routes (under ``/v1``) for one Bot, or every knowledge base of a deployment (the model picks one);
    mount them on any FastAPI app."""
    from bot.api.routes import ChatAPI

    return ChatAPI(bot, settings).router()


def widget_router(bot: Bot, settings: Settings) -> APIRouter:
    """The chat widget's routes (``/widget.js``, ``/widget/chat``, ``/widget/demo``) for one Bot."""
    from bot.api.widget import WidgetAPI

    return WidgetAPI(bot, settings).router()
