"""Several knowledge bases in one deployment: name -> settings, and each one's Bot built on first use (or at
start). Front ends pick one by name (a URL path, the API's ``model``, the CLI's ``--kb``) through :meth:`bot`;
an unknown name is a ConfigError listing the known ones."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from bot.chat.bot import Bot
from bot.chat.routing import Route
from bot.config.knowledge_bases import all_settings
from bot.config.settings import DEFAULT_KB, Settings
from bot.errors import ConfigError


class UnknownKnowledgeBase(ConfigError):
    """A knowledge base name the config does not list; the message lists the ones it does."""

    def __init__(self, name: str, known: list[str]):
        self.name = name
        self.known = known
        super().__init__(f"no knowledge base {name!r}; choose one of: {', '.join(known)}")


class Deployment:
    """The knowledge bases of one config file (the top level is ``default``) and their Bots.

    ``build`` makes a Bot from one knowledge base's settings (the CLI's plain one, or the server's that follows
    config edits); ``bots`` are ready ones to use instead (tests, a caller that built the default itself).
    """

    def __init__(
        self,
        settings: Settings,
        build: Callable[[Settings], Bot] | None = None,
        bots: Mapping[str, Bot] | None = None,
    ):
        self.settings = all_settings(settings)
        self.build = build or _plain_bot
        self._bots: dict[str, Bot] = {}
        self._lock = threading.Lock()
        for name, bot in (bots or {}).items():
            self.settings_of(name)  # a ready Bot for a name the config lacks is a mistake
            self._adopt(name, bot)

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

    def bot(self, name: str = DEFAULT_KB) -> Bot:
        """Knowledge base ``name``'s Bot, built on first use; UnknownKnowledgeBase for a name the config lacks."""
        settings = self.settings_of(name)
        with self._lock:
            if name in self._bots:
                return self._bots[name]
        bot = self.build(settings)  # outside the lock: a slow index build must not hold up the others
        with self._lock:
            return self._bots[name] if name in self._bots else self._adopt(name, bot)

    def start(self) -> dict[str, Bot]:
        """Every knowledge base's Bot, built now (a server: nobody waits for a build on their first message)."""
        return {name: self.bot(name) for name in self.names}

    def _adopt(self, name: str, bot: Bot) -> Bot:
        bot.name = name if self.several else None  # one knowledge base: answers carry no name, as before
        target = self.settings[name].routing.route_to
        if target:
            bot.route = Route(target, self.label(target), lambda: self.bot(target))
        self._bots[name] = bot
        return bot


def _plain_bot(settings: Settings) -> Bot:
    from bot.factory import build_bot

    return build_bot(settings)
