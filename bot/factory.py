"""Building a Bot and its knowledge base from Settings: the one place that reads config and wires the parts."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from bot.chat.answer import Cutoffs
from bot.chat.bot import Bot
from bot.chat.chitchat import ChitChat
from bot.chat.dont_know import DontKnowDetector
from bot.chat.expensive import ExpensiveGate
from bot.chat.grading import RelevanceGrader
from bot.chat.hyde import HydeFallback
from bot.chat.last_resort import LastResort
from bot.chat.llm import BoundedChatModel, ChatModel, OpenAIChat
from bot.chat.negatives import NegativeExamples
from bot.chat.prompt import PromptBuilder
from bot.chat.recorder import TurnRecorder
from bot.chat.related import NEIGHBOURS, RelatedQuestions
from bot.chat.respond import Responder
from bot.chat.rewrite import MultiQueryRewrite
from bot.chat.routing import Route
from bot.chat.splitter import QuestionSplitter
from bot.chat.standalone import QueryRewriter
from bot.chat.steps import Ladder, build_steps
from bot.chat.steps.translate import Translator
from bot.chat.turn_search import CurrentMode, TurnLimits, TurnSearch
from bot.chat.welcome import WelcomeCard
from bot.config.settings import DEFAULT_KB, Settings
from bot.config.watch import ConfiguredMode
from bot.conversations.asking import MostAsked, NextAsked
from bot.conversations.log_store import ConversationLog
from bot.conversations.popular import PopularEntries
from bot.conversations.privacy import PrivacyPolicy
from bot.conversations.turn_log import TurnLogError, turn_log_from_settings
from bot.editing.editor import KnowledgeEditor
from bot.errors import ConfigError, KnowledgeError
from bot.handoff.channels import WeComStaffChannel, configured_channels
from bot.handoff.desk import Desk
from bot.handoff.hours import utc_now
from bot.handoff.store import TicketStore
from bot.knowledge.assets import AssetStore
from bot.knowledge.filters import EntryFilter
from bot.knowledge.shared import KnowledgeSync
from bot.knowledge.store import KnowledgeStore
from bot.knowledge.validity import Availability
from bot.knowledge_base import KnowledgeBase
from bot.search.assembly import build_synonyms, build_tokenizer, searcher_factories
from bot.search.base import Hit
from bot.search.index import KnowledgeIndex
from bot.search.passages import Passages
from bot.search.typeahead import Typeahead

log = logging.getLogger(__name__)
PURGE_EVERY = 3600.0  # seconds between retention runs of a server's conversation log


@dataclass(frozen=True)
class LLMSteps:
    """What the LLM does besides answering; each part is None without an LLM or when switched off."""

    hyde: HydeFallback | None = None
    rewriter: QueryRewriter | None = None  # follow-ups made standalone
    multi_query: MultiQueryRewrite | None = None  # the "rewrite" fallback step
    grader: RelevanceGrader | None = None
    translator: Translator | None = None  # the "translate" fallback step
    dont_know: DontKnowDetector | None = None  # tells a reply that declines to answer


def thresholds(settings: Settings) -> dict[str, Cutoffs]:
    """Each retrieval system's thresholds, in relevance (the same unit for every backend of a system)."""
    return {name: Cutoffs.from_settings(name, c) for name, c in settings.retrieval.thresholds.items()}


def build_llm(settings: Settings) -> ChatModel | None:
    """The chat model, or None (retrieval-only) when no API key is in the environment."""
    key = settings.llm.api_key()
    if key is None:
        log.info("no %s in the environment: retrieval-only mode", settings.llm.api_key_env)
        return None
    s = settings.llm
    chat = OpenAIChat(s, key)
    # Slow calls queue for one of max_concurrency slots (up to the LLM timeout) instead of starving every worker.
    return BoundedChatModel(chat, s.max_concurrency, s.timeout, settings.limits.max_step_chars)


def build_index(settings: Settings, background: bool = False) -> KnowledgeIndex:
    """The knowledge index with every mode's searcher factory; nothing is built yet.

    With ``background`` (a server) its updates run off the request path. Temporary files a killed process left are
    removed first.
    """
    from bot.search.integrity import clean_stale_temp

    clean_stale_temp([settings.resolve(settings.state_dir)])
    tokenizer = build_tokenizer(settings)
    p = settings.retrieval.passages
    passages = Passages(p.size, p.overlap) if p.enabled else None
    sync = knowledge_sync(settings)
    synonyms = build_synonyms(settings, tokenizer)  # read now: a bad line stops the start
    return KnowledgeIndex(
        settings.resolve(settings.knowledge.path),
        tokenizer,
        searcher_factories(settings, tokenizer, synonyms),
        background=background,
        passages=passages,
        pull=sync.pull if sync is not None else None,
        synonyms=synonyms,
    )


def knowledge_sync(settings: Settings) -> KnowledgeSync | None:
    """The process's mirror of the knowledge replicas share, None when the folder is the knowledge.

    ``knowledge.shared: postgres``; ConfigError (naming the variable) for a missing or malformed DSN.
    """
    if settings.knowledge.shared == "none":
        return None
    from bot.knowledge.shared_knowledge import shared_knowledge

    state = settings.resolve(settings.state_dir)
    pg = settings.log.postgres
    return shared_knowledge(
        pg.dsn_env, pg.connect_timeout, settings.resolve(settings.knowledge.path), state / "locks", state / "history"
    )


def build_store(settings: Settings) -> KnowledgeStore:
    """Locked, validated writes into the knowledge folder (locks and history live in the state folder)."""
    state = settings.resolve(settings.state_dir)
    return KnowledgeStore(
        settings.resolve(settings.knowledge.path),
        state / "locks",
        history_dir=state / "history",
        history_versions=settings.knowledge.history_versions,
        sync=knowledge_sync(settings),
    )


def build_recorder(settings: Settings, purge_every: float | None = None) -> TurnRecorder:
    """The conversation log of ``settings.log``; one that cannot be opened is logged and the bot runs without it.

    With ``purge_every`` (seconds; the app) retention also runs on a timer, so old turns go without new traffic.
    """
    try:
        recorder = TurnRecorder(turn_log_from_settings(settings))
    except TurnLogError as exc:
        log.error("conversation log off: %s", exc)
        return TurnRecorder(None)
    if purge_every:
        recorder.purge_every(purge_every)
    return recorder


def turn_limits(settings: Settings) -> TurnLimits:
    """How much work one turn may do (``limits.*``, ``retrieval.top_k``)."""
    limits = settings.limits
    return TurnLimits(
        top_k=settings.retrieval.top_k,
        max_message_chars=limits.max_message_chars,
        max_answer_chars=limits.max_answer_chars,
        max_search_chars=limits.max_search_chars,
        expensive=ExpensiveGate(
            limits.long_message_chars, limits.long_message_concurrency, limits.long_message_wait_seconds
        ),
    )


def llm_steps(settings: Settings, llm: ChatModel | None) -> LLMSteps:
    """The LLM's jobs besides answering, as configured (all None without an LLM, but the "I don't know" check)."""
    dont_know = DontKnowDetector(settings.ladder.dont_know_patterns)
    if llm is None:
        return LLMSteps(dont_know=dont_know)
    return LLMSteps(
        hyde=HydeFallback(llm, settings.fallback.hyde),
        rewriter=QueryRewriter(llm, settings.conversation.rewrite_template, settings.prompt.max_history_turns)
        if settings.conversation.rewrite
        else None,
        multi_query=MultiQueryRewrite(llm, settings.fallback.rewrite),
        grader=RelevanceGrader(llm, settings.retrieval.grading) if settings.retrieval.grading.enabled else None,
        translator=Translator(llm, settings.fallback.translate),
        dont_know=dont_know,
    )


def build_desk(settings: Settings, turn_log: ConversationLog | None) -> Desk | None:
    """The hand-off desk of ``settings.handoff``, None when hand-off is off.

    Tickets live in the conversation log's database (none without a log); they are answered in the chat when agents
    or an admin can log in, and staff are told on the configured channels.
    """
    h = settings.handoff
    if not h.enabled:
        return None
    privacy = PrivacyPolicy.from_settings(settings.privacy)
    if settings.kb_name != DEFAULT_KB:
        # The console and the notices' worker serve the default knowledge base's desk only: another one keeps its
        # tickets (its inbox lists them) but promises nothing and gives handoff.contact.
        return Desk(h, TicketStore(turn_log, clock=utc_now) if turn_log is not None else None, mask=privacy.stored.mask)
    staff = list(configured_channels(h))
    if h.notify.wecom_users and settings.wecom.enabled:
        staff.append(WeComStaffChannel.name)
    elif h.notify.wecom_users:
        log.warning("handoff.notify.wecom_users is set but wecom.enabled is false: staff get no WeCom message")
    if turn_log is None:
        log.warning("hand-off without the conversation log (log.enabled): no tickets, a request gets handoff.contact")
    return Desk(
        h,
        TicketStore(turn_log, clock=utc_now) if turn_log is not None else None,
        turns=turn_log,
        mask=privacy.stored.mask,
        staffed=bool(h.agents) or settings.ui.admin.credentials() is not None,
        staff_channels=staff,
        retention_days=settings.log.retention_days,
    )


def build_ladder(settings: Settings, turn_log: ConversationLog | None = None) -> Ladder:
    """The ladder's rungs before the fallback chain, the chain, and the small-talk set and hand-off desk they use."""
    return Ladder(
        steps=tuple(settings.ladder.steps),
        chain=tuple(settings.fallback.chain),
        chitchat=ChitChat.from_settings(settings.chitchat) if settings.chitchat.enabled else None,
        desk=build_desk(settings, turn_log),
        max_options=settings.ladder.max_options,
        rules_timeout=settings.knowledge.rules_timeout,
    )


def build_bot(
    settings: Settings,
    llm: ChatModel | None = None,
    index: KnowledgeIndex | None = None,
    load: bool = True,
    watch_config: bool = False,
    keep_last_good: bool = False,
    background: bool | None = None,
    recorder: TurnRecorder | None = None,
) -> Bot:
    """A ready Bot; with ``load`` the knowledge is read and the configured mode's index synced now.

    With ``watch_config`` (the app) an edit of ``retrieval.mode`` in the config file switches the running bot.
    With ``keep_last_good`` (a server) knowledge that does not load is logged and the index built from the last
    good knowledge keeps serving; without it (the CLI, scripts) it is an error, never an answer from an old index.
    With ``background`` (default: both of the above, i.e. the app) the bot serves at once: indexes are built and
    updated by background workers, and a mode whose index is not ready yet is answered from another with a notice.
    ``recorder``: the conversation log whose most used entries the bot offers (default: the one of ``settings``).
    """
    background = watch_config and keep_last_good if background is None else background
    index = index or build_index(settings, background)
    llm = llm if llm is not None else build_llm(settings)
    mode = settings.mode
    if mode not in index.modes:
        raise ConfigError(f"retrieval.mode is {mode!r}; choose one of: {', '.join(index.modes)}")
    recorder = recorder or build_recorder(settings, purge_every=PURGE_EVERY if background else None)
    limits = turn_limits(settings)
    # The LLM's other jobs: none without an LLM, but the check of a reply that declines to answer.
    helpers = llm_steps(settings, llm)
    s = settings.splitting
    splitter = QuestionSplitter(s.conjunctions, s.min_part_chars, s.max_parts) if s.enabled else None
    ladder = build_ladder(settings, recorder.log)
    configured = (
        ConfiguredMode(settings.source, mode, kb=settings.kb_name) if watch_config and settings.source else None
    )
    search = TurnSearch(
        index,
        thresholds(settings),
        limits,
        CurrentMode(mode, index.modes, configured),
        rewriter=helpers.rewriter,
        multi_query=helpers.multi_query,
        grader=helpers.grader,
        splitter=splitter,
        negatives=NegativeExamples(settings.knowledge.negative_similarity),
        availability=Availability(settings.knowledge.timezone),
        chitchat=ladder.chitchat,
        substitute_followups=llm is None,
    )
    popular = PopularEntries(recorder.log)
    last_resort = LastResort(settings.fallback.last_resort)
    responder = Responder(
        PromptBuilder(settings.prompt), last_resort, llm, splitter, limits.max_answer_chars, helpers.dont_know
    )
    steps = build_steps(
        ladder,
        ladder.chain,
        responder,
        search,
        lambda: index.entries,
        helpers.hyde,
        rewrite=helpers.multi_query is not None,
        translator=helpers.translator,
        popular=lambda n: popular.top(index.entries, n),
        rules=lambda: index.rules,
    )
    bot = Bot(
        search,
        steps,
        limits,
        llm_name=llm.name if llm is not None else None,
        privacy=PrivacyPolicy.from_settings(settings.privacy),
        popular=popular,
        desk=ladder.desk,
    )
    if load:
        try:
            index.load()
        except KnowledgeError:
            # A bad edit must not take the bot down when an index from the last good knowledge exists.
            if not keep_last_good or any(leaf.indexed_hashes() is None for leaf in index.searcher(mode).leaves()):
                raise
            log.error("knowledge not loaded, serving the last good index from disk: %s", index.error)
        if index.background and "sparse" in index.modes:
            # The cheap index is ready before the first message (about a second for the starter knowledge, a few
            # at 10k entries), so nobody is told "nothing found" while a dense index builds in the background.
            index.wait_ready("sparse", timeout=300)
        index.searcher(mode)
    return bot


def build_knowledge_base(
    settings: Settings,
    bot: Bot | None = None,
    *,
    name: str | None = None,
    route: Route | None = None,
    watch_config: bool = False,
    keep_last_good: bool = False,
) -> KnowledgeBase:
    """The knowledge base of ``settings`` as a front end is given it.

    Its Bot (``bot`` when ready, else built as :func:`build_bot` does), conversation log, store and editor; ``name``
    among several, ``route`` to another.
    """
    background = watch_config and keep_last_good
    recorder = build_recorder(settings, purge_every=PURGE_EVERY if background else None)
    if bot is None:
        bot = build_bot(settings, watch_config=watch_config, keep_last_good=keep_last_good, recorder=recorder)
    store = build_store(settings)
    editor = KnowledgeEditor(bot.search.index, store)
    return KnowledgeBase(
        bot,
        recorder,
        store,
        editor,
        AssetStore(settings.resolve(settings.knowledge.path), settings.knowledge.assets.max_bytes),
        *build_suggestions(settings, bot, recorder.log),
        name=name,
        route=route,
        typeahead=build_typeahead(settings, bot, recorder, background),
    )


def build_suggestions(
    settings: Settings, bot: Bot, turn_log: ConversationLog | None
) -> tuple[RelatedQuestions, WelcomeCard]:
    """What a knowledge base offers to ask: related questions after an answer, and the welcome card."""
    index = bot.search.index
    availability = Availability(settings.knowledge.timezone)

    def neighbours(query: str, within: EntryFilter | None) -> list[Hit]:
        return bot.search.retrieve(query, top_k=NEIGHBOURS, within=within)[0]

    related = RelatedQuestions(lambda: index.entries, NextAsked(turn_log), neighbours, availability)
    welcome = WelcomeCard(
        lambda: index.entries,
        settings.ui,
        MostAsked(turn_log, settings.ui.welcome_days),
        PrivacyPolicy.from_settings(settings.privacy).detect,
        availability,
    )
    return related, welcome


def build_typeahead(settings: Settings, bot: Bot, recorder: TurnRecorder, background: bool) -> Typeahead:
    """The questions offered while a visitor types, from the bot's knowledge, ranked by the log's counts."""
    turn_log = recorder.log
    asked = (lambda: {entry: hits.turns for entry, hits in turn_log.hit_counts().items()}) if turn_log else None
    index = bot.search.index
    return Typeahead(
        settings.typeahead,
        lambda: index.entries,
        index.synonyms,
        Availability(settings.knowledge.timezone),
        asked=asked,
        background=background,
    )
