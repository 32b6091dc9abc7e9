"""Several knowledge bases in one deployment, each built once, on first use or at start.

Front ends pick one by name (a URL path, the API's ``model``, the CLI's ``--kb``) through
:meth:`Deployment.knowledge_base`; an unknown name is a ConfigError listing the known ones.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping

from bot.chat.routing import Route
from bot.config.knowledge_bases import all_settings
from bot.config.settings import DEFAULT_KB, Settings
from bot.errors import ConfigError
from bot.knowledge_base import KnowledgeBase

# Builds one knowledge base from its settings, with its name (None when it is the only one) and its route.
Build = Callable[[Settings, str | None, Route | None], KnowledgeBase]


class UnknownKnowledgeBase(ConfigError):
    """A knowledge base name the config does not list; the message lists the ones it does."""

    def __init__(self, name: str, known: list[str]):
        self.name = name
        self.known = known
        super().__init__(f"no knowledge base {name!r}; choose one of: {', '.join(known)}")


class Deployment:
    """The knowledge bases of one config file (the top level is ``default``), each built once.

    ``build`` makes a KnowledgeBase from one knowledge base's settings (the CLI's plain one, or the server's that
    follows config edits); ``ready`` are built ones to use instead (tests, a caller that built the default itself).
    """

    def __init__(
        self, settings: Settings, build: Build | None = None, ready: Mapping[str, KnowledgeBase] | None = None
    ):
        self.settings = all_settings(settings)
        self.build = build or _plain
        self._built: dict[str, KnowledgeBase] = {}
        self._lock = threading.Lock()
        for name, kb in (ready or {}).items():
            self.settings_of(name)  # a ready knowledge base for a name the config lacks is a mistake
            self._built[name] = dataclasses.replace(kb, name=self._own_name(name), route=self._route(name))

    @property
    def names(self) -> list[str]:
        """Every knowledge base's name, the default first."""
        return list(self.settings)

    @property
    def several(self) -> bool:
        """True when the config lists more than the default knowledge base."""
        return len(self.settings) > 1

    def settings_of(self, name: str) -> Settings:
        """The whole settings of knowledge base ``name``; UnknownKnowledgeBase when there is none."""
        if name not in self.settings:
            raise UnknownKnowledgeBase(name, self.names)
        return self.settings[name]

    def label(self, name: str) -> str:
        """The name people see: ``routing.label``, else the name."""
        return self.settings_of(name).routing.label or name

    def knowledge_base(self, name: str = DEFAULT_KB) -> KnowledgeBase:
        """Knowledge base ``name``, built on first use; UnknownKnowledgeBase for a name the config lacks."""
        settings = self.settings_of(name)
        with self._lock:
            if name in self._built:
                return self._built[name]
        # outside the lock: a slow index build must not hold up the others
        kb = self.build(settings, self._own_name(name), self._route(name))
        with self._lock:
            return self._built.setdefault(name, kb)

    def start(self) -> dict[str, KnowledgeBase]:
        """Every knowledge base, built now (a server: nobody waits for a build on their first message)."""
        return {name: self.knowledge_base(name) for name in self.names}

    def _own_name(self, name: str) -> str | None:
        return name if self.several else None  # one knowledge base: answers carry no name

    def _route(self, name: str) -> Route | None:
        target = self.settings[name].routing.route_to
        if not target:
            return None
        return Route(target, self.label(target), lambda: self.knowledge_base(target).bot)


def _plain(settings: Settings, name: str | None, route: Route | None) -> KnowledgeBase:
    from bot.factory import build_knowledge_base

    return build_knowledge_base(settings, name=name, route=route)
