"""Building a Bot from Settings: the one place that reads config and wires the parts together."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from bot.chat.answer import Cutoffs
from bot.chat.bot import Bot
from bot.chat.chitchat import ChitChat
from bot.chat.conversation import QueryRewriter
from bot.chat.dont_know import DontKnowDetector
from bot.chat.expensive import ExpensiveGate
from bot.chat.fallback import HydeFallback, LastResort
from bot.chat.grading import RelevanceGrader
from bot.chat.handoff import Handoff
from bot.chat.limits import BoundedChatModel
from bot.chat.llm import ChatModel, OpenAIChat
from bot.chat.negatives import NegativeExamples
from bot.chat.parts import KnowledgeAids, LLMSteps, TurnLimits
from bot.chat.prompt import PromptBuilder
from bot.chat.rewrite import MultiQueryRewrite
from bot.chat.splitter import QuestionSplitter
from bot.chat.steps import Ladder
from bot.chat.steps.translate import Translator
from bot.config.settings import Settings
from bot.config.watch import ConfiguredMode
from bot.conversations.popular import PopularEntries
from bot.conversations.privacy import PrivacyPolicy
from bot.conversations.recorder import TurnRecorder
from bot.conversations.turn_log import TurnLogError, turn_log_from_settings
from bot.errors import ConfigError, KnowledgeError, SearchBackendError
from bot.knowledge.shared import KnowledgeSync
from bot.knowledge.store import KnowledgeStore
from bot.search.base import ModeSearcher, Searcher
from bot.search.index import KnowledgeIndex
from bot.search.passages import Passages
from bot.search.relevance import SparseSearcher
from bot.search.synonyms import Synonyms
from bot.search.tokenizer import Tokenizer

if TYPE_CHECKING:
    from bot.search.encoders import Encoder
    from bot.search.es_vectors import ClusterVectors
    from bot.search.faiss_searcher import FaissSearcher

log = logging.getLogger(__name__)
PURGE_EVERY = 3600.0  # seconds between retention runs of a server's conversation log


def build_tokenizer(settings: Settings) -> Tokenizer:
    """The shared jieba tokenizer, with the optional user dictionary."""
    user_dict = settings.resolve(settings.knowledge.user_dict) if settings.knowledge.user_dict else None
    return Tokenizer(user_dict=user_dict, cache_dir=settings.resolve(settings.state_dir) / "jieba")


def build_synonyms(settings: Settings, tokenizer: Tokenizer) -> Synonyms | None:
    """The synonym file of ``knowledge.synonyms`` (re-read when it changes), or None when none is configured."""
    if not settings.knowledge.synonyms:
        return None
    return Synonyms(settings.resolve(settings.knowledge.synonyms), tokenizer)


def sparse_searcher(settings: Settings, tokenizer: Tokenizer) -> SparseSearcher:
    """The configured sparse engine: embedded tantivy, or Elasticsearch checked reachable; with
    ``fallback_to_embedded``, an unreachable Elasticsearch is replaced by tantivy built with a visible notice."""
    from bot.search.tantivy_searcher import TantivySearcher

    path = settings.resolve(settings.state_dir) / "tantivy"
    weights: dict[str, int] = dict(settings.retrieval.sparse.field_weights.items())  # field name -> weight
    if settings.retrieval.sparse.backend != "elasticsearch":
        return TantivySearcher(path, tokenizer, weights)
    from bot.search.es_searcher import build_elasticsearch_searcher
    from bot.texts import FALLBACK_NOTICE

    try:
        return build_elasticsearch_searcher(settings, tokenizer)
    except SearchBackendError as exc:
        if not settings.retrieval.sparse.elasticsearch.fallback_to_embedded:
            raise
        log.warning("Elasticsearch unavailable, falling back to the embedded engine: %s", exc)
        return TantivySearcher(path, tokenizer, weights, notice=FALLBACK_NOTICE, fallback_reason=str(exc))


def cluster_vectors(settings: Settings, encoder: Encoder) -> ClusterVectors:
    """The dense index on the search cluster of ``retrieval.sparse.elasticsearch`` (index ``<index>-vectors``),
    checked reachable: every replica reads the vectors that whichever replica wrote them encoded."""
    from bot.search.es_client import build_client
    from bot.search.es_cluster import ClusterIndex
    from bot.search.es_searcher import safe_host
    from bot.search.es_vectors import ClusterVectors

    es, d = settings.retrieval.sparse.elasticsearch, settings.retrieval.dense
    hosts = ", ".join(safe_host(h) for h in es.hosts)
    cluster = ClusterIndex(build_client(settings, es), f"{es.index}-vectors", hosts, es.shards, es.replicas)
    searcher = ClusterVectors(cluster, encoder, d.embed_template, d.question_weight, es.vector_form)
    _ = searcher.form  # reads the server's version: an unreachable cluster stops the start, naming the host
    return searcher


def searcher_factories(settings: Settings, tokenizer: Tokenizer) -> dict[str, Callable[[], ModeSearcher]]:
    """mode -> a function that builds that mode's searcher (called lazily, on first use)."""
    state = settings.resolve(settings.state_dir)
    synonyms = build_synonyms(settings, tokenizer)  # one file for every mode, read now: a bad line stops the start

    def sparse() -> SparseSearcher:
        searcher = sparse_searcher(settings, tokenizer)
        searcher.synonyms = synonyms
        return searcher

    def dense() -> Searcher:
        from bot.errors import ConfigError
        from bot.search.encoders import E5Encoder, FastTextEncoder, FastTextParams, OpenAIEncoder
        from bot.search.faiss_searcher import FaissSearcher

        d = settings.retrieval.dense
        encoder: Encoder
        if d.encoder == "openai":
            key = d.openai.api_key()
            if key is None:
                raise ConfigError(
                    f"retrieval.dense.encoder is openai but {d.openai.api_key_env} is not set in the environment"
                )
            o = d.openai
            encoder = OpenAIEncoder(
                o.base_url,
                o.model,
                key,
                state / "embeddings",
                o.batch_size,
                o.timeout,
                o.max_retries,
                o.input_type,
                key_env=o.api_key_env,
            )
        elif d.encoder == "e5":
            e = d.e5
            encoder = E5Encoder(state / "embeddings", e.num_threads, e.batch_size, e.variant)
        else:
            f = d.fasttext
            params = FastTextParams(
                dim=f.dim,
                epoch=f.epoch,
                minn=f.minn,
                maxn=f.maxn,
                bucket=f.bucket,
                ws=f.ws,
                lr=f.lr,
                min_count=f.min_count,
                threads=f.threads,
                seed=f.seed,
                subsample=f.subsample,
                neg=f.neg,
                output_vectors=f.output_vectors,
                target_tokens=f.target_tokens,
                max_epoch=f.max_epoch,
            )
            pretrained = settings.resolve(f.pretrained) if f.pretrained else None
            encoder = FastTextEncoder(
                tokenizer, state / "fasttext", pretrained, params, f.sif_a, retrain_after=f.retrain_after
            )
        searcher: FaissSearcher | ClusterVectors
        if d.store == "elasticsearch":
            searcher = cluster_vectors(settings, encoder)
        else:
            searcher = FaissSearcher(state / "faiss", encoder, d.embed_template, d.question_weight, d.hnsw_above)
        searcher.synonyms, searcher.synonym_mode = synonyms, d.synonyms
        return searcher

    def hybrid() -> ModeSearcher:
        from bot.search.base import DenseRetriever
        from bot.search.hybrid import HybridSearcher

        h = settings.retrieval.hybrid
        dense_searcher = factories["dense"]()
        assert isinstance(dense_searcher, DenseRetriever)  # built by dense()
        weight = h.sparse_weight.get(settings.retrieval.dense.encoder)
        if weight is None:
            raise ConfigError(
                f"retrieval.hybrid.sparse_weight has no value for the {settings.retrieval.dense.encoder} "
                'encoder; add one (docs/retrieval-and-decision.md "Scores and thresholds")'
            )
        sparse_searcher = factories["sparse"]()
        assert isinstance(sparse_searcher, SparseSearcher)  # built by sparse()
        return HybridSearcher(sparse_searcher, dense_searcher, weight, h.candidates)

    # Memoised so the hybrid mode wraps the very instances the sparse and dense modes use (one index each).
    built: dict[str, Searcher] = {}

    def once(name: str, build: Callable[[], Searcher]) -> Callable[[], Searcher]:
        return lambda: built[name] if name in built else built.setdefault(name, build())

    factories = {"sparse": once("sparse", sparse), "dense": once("dense", dense), "hybrid": hybrid}
    return factories


def thresholds(settings: Settings) -> dict[str, Cutoffs]:
    """Each retrieval system's thresholds, in relevance (the same unit for every backend of a system)."""
    return {
        name: Cutoffs(name, c.answer, c.direct, c.clarify, c.confirm)
        for name, c in settings.retrieval.thresholds.items()
    }


def build_llm(settings: Settings) -> ChatModel | None:
    """The chat model, or None (retrieval-only) when no API key is in the environment."""
    key = settings.llm.api_key()
    if key is None:
        log.info("no %s in the environment: retrieval-only mode", settings.llm.api_key_env)
        return None
    s = settings.llm
    chat = OpenAIChat(
        base_url=s.base_url,
        model=s.model,
        api_key=key,
        temperature=s.temperature,
        max_tokens=s.max_tokens,
        timeout=s.timeout,
        max_retries=s.max_retries,
        key_env=s.api_key_env,
        max_reasoning_chars=s.max_reasoning_chars,
    )
    # Slow calls queue for one of max_concurrency slots (up to the LLM timeout) instead of starving every worker.
    return BoundedChatModel(chat, s.max_concurrency, s.timeout, settings.limits.max_step_chars)


def build_index(settings: Settings, background: bool = False) -> KnowledgeIndex:
    """The knowledge index with every mode's searcher factory (nothing is built yet); with ``background`` (a
    server) its updates run off the request path. Temporary files a killed process left are removed first."""
    from bot.search.healing import clean_stale_temp

    clean_stale_temp([settings.resolve(settings.state_dir)])
    tokenizer = build_tokenizer(settings)
    p = settings.retrieval.passages
    passages = Passages(p.size, p.overlap) if p.enabled else None
    sync = knowledge_sync(settings)
    return KnowledgeIndex(
        settings.resolve(settings.knowledge.path),
        tokenizer,
        searcher_factories(settings, tokenizer),
        background=background,
        passages=passages,
        pull=sync.pull if sync is not None else None,
    )


def knowledge_sync(settings: Settings) -> KnowledgeSync | None:
    """The process's mirror of the knowledge shared by replicas (``knowledge.shared: postgres``), None when the
    folder is the knowledge; ConfigError (naming the variable) for a missing or malformed DSN."""
    if settings.knowledge.shared == "none":
        return None
    from bot.chat.shared_knowledge import shared_knowledge

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


def build_ladder(settings: Settings) -> Ladder:
    """The ladder's rungs before the fallback chain, the chain, and the small-talk set and hand-off they use."""
    return Ladder(
        steps=tuple(settings.ladder.steps),
        chain=tuple(settings.fallback.chain),
        chitchat=ChitChat.from_settings(settings.chitchat) if settings.chitchat.enabled else None,
        handoff=Handoff.from_settings(settings.handoff) if settings.handoff.enabled else None,
        max_options=settings.ladder.max_options,
    )


def build_bot(
    settings: Settings,
    llm: ChatModel | None = None,
    index: KnowledgeIndex | None = None,
    load: bool = True,
    watch_config: bool = False,
    keep_last_good: bool = False,
    background: bool | None = None,
) -> Bot:
    """A ready Bot; with ``load`` the knowledge is read and the configured mode's index synced now.

    With ``watch_config`` (the app) an edit of ``retrieval.mode`` in the config file switches the running bot.
    With ``keep_last_good`` (a server) knowledge that does not load is logged and the index built from the last
    good knowledge keeps serving; without it (the CLI, scripts) it is an error, never an answer from an old index.
    With ``background`` (default: both of the above, i.e. the app) the bot serves at once: indexes are built and
    updated by background workers, and a mode whose index is not ready yet is answered from another with a notice.
    """
    background = watch_config and keep_last_good if background is None else background
    index = index or build_index(settings, background)
    llm = llm if llm is not None else build_llm(settings)
    mode = settings.mode
    recorder = build_recorder(settings, purge_every=PURGE_EVERY if background else None)
    bot = Bot(
        index=index,
        thresholds=thresholds(settings),
        prompt=PromptBuilder(settings.prompt),
        last_resort=LastResort(settings.fallback.last_resort),
        limits=turn_limits(settings),
        llm=llm,
        llm_steps=llm_steps(settings, llm),
        aids=KnowledgeAids(
            splitter=QuestionSplitter(
                settings.splitting.conjunctions, settings.splitting.min_part_chars, settings.splitting.max_parts
            )
            if settings.splitting.enabled
            else None,
            negatives=NegativeExamples(settings.knowledge.negative_similarity),
            popular=PopularEntries(recorder.log),
        ),
        ladder=build_ladder(settings),
        mode=mode,
        mode_source=ConfiguredMode(settings.source, mode, kb=settings.kb_name)
        if watch_config and settings.source
        else None,
        recorder=recorder,
        privacy=PrivacyPolicy.from_settings(settings.privacy),
    )
    if mode not in index.modes:
        from bot.errors import ConfigError

        raise ConfigError(f"retrieval.mode is {mode!r}; choose one of: {', '.join(index.modes)}")
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
