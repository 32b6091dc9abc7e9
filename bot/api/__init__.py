"""An OpenAI-compatible HTTP API (``/v1/models``, ``/v1/chat/completions``) over the Bot, for integrators.

It is served by the same process and port as the browser app (app.py passes the routes to Gradio's FastAPI
app). The model name picks the retrieval mode; the answer's sources come in an extra top-level ``kbbot`` field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fastapi import APIRouter

    from bot.config.settings import Settings
    from bot.deployment import Deployment
    from bot.knowledge_base import KnowledgeBase


def api_router(served: KnowledgeBase | Deployment, settings: Settings) -> APIRouter:
    """The API's routes (under ``/v1``) for one knowledge base, or every one of a deployment (the model picks one);
    mount them on any FastAPI app."""
    from bot.api.routes import ChatAPI

    return ChatAPI(served, settings).router()


def widget_router(kb: KnowledgeBase, settings: Settings) -> APIRouter:
    """The chat widget's routes (``/widget.js``, ``/widget/chat``, ``/widget/demo``) for one knowledge base."""
    from bot.api.widget import WidgetAPI

    return WidgetAPI(kb, settings).router()
