"""Searchers: each turns a question into ranked hits over the knowledge entries."""

from bot.search.base import Hit, Searcher, SyncReport

__all__ = ["Hit", "Searcher", "SyncReport"]
