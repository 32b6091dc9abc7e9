"""What a front end is given for one knowledge base: its bot, log, store and editor, with routing and recording."""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

from bot.chat.answer import Answer
from bot.chat.bot import Bot
from bot.chat.recorder import TurnRecorder, recorded
from bot.chat.related import RelatedQuestions
from bot.chat.routing import Route, routed
from bot.chat.turn_search import TurnSearch
from bot.chat.welcome import WelcomeCard
from bot.conversations.log_store import ConversationLog
from bot.editing.editor import KnowledgeEditor
from bot.handoff.desk import Desk
from bot.handoff.tickets import Conversation
from bot.knowledge.assets import AssetStore
from bot.knowledge.filters import EntryFilter
from bot.knowledge.store import KnowledgeStore
from bot.messages import History
from bot.search.index import KnowledgeIndex
from bot.search.typeahead import Typeahead


@dataclass(frozen=True)
class KnowledgeBase:
    """One knowledge base as the front ends see it; built by the factory (bot/factory.py).

    :meth:`turn` is a front end's turn: the Bot's own ladder, a question it finds nothing for sent on along
    ``route`` (another knowledge base, labelled), the finished answer given its related questions and recorded in
    the conversation log.
    """

    bot: Bot
    recorder: TurnRecorder
    store: KnowledgeStore
    editor: KnowledgeEditor
    assets: AssetStore  # the pictures and files the documents show (knowledge/assets/)
    related: RelatedQuestions  # the questions offered after an answer (猜你想问)
    welcome: WelcomeCard  # the questions offered before the first message
    name: str | None = None  # among several knowledge bases, the one that answers (None: the only one)
    route: Route | None = None  # where a question this one finds nothing for goes (``routing.route_to``)
    typeahead: Typeahead | None = None  # the questions offered while a visitor types (None: none offered)

    @property
    def log(self) -> ConversationLog | None:
        """The conversation log the turns are recorded in (None: recording is off)."""
        return self.recorder.log

    @property
    def search(self) -> TurnSearch:
        """How the bot searches (the retrieval test, test sets and the knowledge check search as a turn does)."""
        return self.bot.search

    @property
    def index(self) -> KnowledgeIndex:
        """The knowledge index: its entries, modes and indexing progress, for the admin pages."""
        return self.bot.search.index

    @property
    def desk(self) -> Desk | None:
        """The hand-off desk (tickets, agents' replies), None when hand-off is off."""
        return self.bot.desk

    def mask(self, text: str | None) -> str | None:
        """``text`` with personal data masked as the log stores it (an IM channel's remembered messages too)."""
        return self.bot.privacy.stored.mask(text)

    def catch_up(self) -> None:
        """Pick up knowledge files changed on disk since the last message, as a message would.

        A page calls it before it shows what is loaded: the CLI's or another process's edit counts at once.
        """
        self.bot.index.refresh()

    def welcome_questions(self, within: EntryFilter | None = None) -> list[str]:
        """The welcome card's questions for a visitor searching ``within`` (None: the whole knowledge)."""
        return self.welcome.questions(within)

    def turn(
        self,
        message: str,
        history: History | None = None,
        *,
        mode: str | None = None,
        within: EntryFilter | None = None,
        session: str | None = None,
        source: str | None = None,
        conversation: Conversation | None = None,
    ) -> Iterator[Answer]:
        """Snapshots of the answer, routed and named; with a ``source`` ("web", "api"...: the channel, whose
        variant of an entry a verbatim reply uses) the finished one recorded.

        ``session`` is an opaque id the front end chose; a failing log never breaks the turn. ``conversation`` is
        where a hand-off to a person would answer (None: the front end cannot show a person's replies).
        """
        own = self.bot.stream(message, history, mode=mode, within=within, conversation=conversation, channel=source)
        named = own if self.name is None else (dataclasses.replace(a, knowledge_base=self.name) for a in own)
        routed_on = routed(named, self.route, message, history, within, source)
        # An answer routed from another knowledge base names entries of that one: it offers none of ours.
        with_related = (self.related.added(a) if a.knowledge_base == self.name else a for a in routed_on)
        yield from recorded(with_related, self.recorder, session, source)

    def ask(
        self,
        message: str,
        history: History | None = None,
        *,
        mode: str | None = None,
        within: EntryFilter | None = None,
        session: str | None = None,
        source: str | None = None,
        conversation: Conversation | None = None,
    ) -> Answer:
        """The finished answer of :meth:`turn`."""
        turn = self.turn(
            message, history, mode=mode, within=within, session=session, source=source, conversation=conversation
        )
        return deque(turn, maxlen=1)[0]
