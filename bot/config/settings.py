"""Typed settings read from config.yaml; unknown keys are rejected with the valid ones listed.

The blocks live in modules by role (knowledge, retrieval, dense, llm, ladder, serving); this module holds the whole
``Settings``, the log and privacy blocks, and loading, and re-exports every block so ``bot.config.settings`` stays
the one import.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, field_validator

from bot.config.base import Strict, check_template, default_of
from bot.config.channels import FeishuSettings, WeComSettings
from bot.config.dense import DenseSettings, E5Settings, FastTextSettings, OpenAIEmbeddingSettings
from bot.config.handoff import (
    AgentAccount,
    EmailSettings,
    HandoffSettings,
    HandoffWebhookSettings,
    HoursSettings,
    NotifySettings,
)
from bot.config.knowledge import KnowledgeSettings, LintSettings, RoutingSettings
from bot.config.ladder import (
    DEFAULT_REWRITE_TEMPLATE,
    DEFAULT_TRANSLATE_TEMPLATE,
    FALLBACK_STEPS,
    LADDER_STEPS,
    ChitChatSettings,
    FallbackSettings,
    HydeSettings,
    LadderSettings,
    LastResortSettings,
    RewriteSettings,
    SplittingSettings,
    TranslateSettings,
)
from bot.config.llm import ConversationSettings, Demonstration, LLMSettings, PromptSettings
from bot.config.operating import FeedbackSettings, OutcomeSettings, TopicSettings
from bot.config.retrieval import (
    DEFAULT_GRADING_TEMPLATE,
    ENCODERS,
    FIELD_NAMES,
    MODES,
    SYSTEMS,
    CutoffSettings,
    ElasticsearchSettings,
    EncoderName,
    FieldName,
    GradingSettings,
    HybridSettings,
    Mode,
    PassageSettings,
    RetrievalSettings,
    SparseSettings,
)
from bot.config.serving import (
    AdminSettings,
    APISettings,
    AuthSettings,
    LimitSettings,
    TypeaheadSettings,
    UISettings,
    WidgetSettings,
)
from bot.config.storage import PostgresSettings
from bot.errors import ConfigError

__all__ = [
    "DEFAULT_GRADING_TEMPLATE",
    "DEFAULT_KB",
    "DEFAULT_REFUSAL",
    "DEFAULT_REWRITE_TEMPLATE",
    "DEFAULT_TRANSLATE_TEMPLATE",
    "ENCODERS",
    "FALLBACK_STEPS",
    "FIELD_NAMES",
    "LADDER_STEPS",
    "MODES",
    "MODE_ENV",
    "PII_KINDS",
    "SYSTEMS",
    "APISettings",
    "AdminSettings",
    "AgentAccount",
    "AuthSettings",
    "ChitChatSettings",
    "ConversationSettings",
    "CutoffSettings",
    "Demonstration",
    "DenseSettings",
    "E5Settings",
    "ElasticsearchSettings",
    "EmailSettings",
    "EncoderName",
    "FallbackSettings",
    "FastTextSettings",
    "FieldName",
    "GradingSettings",
    "HandoffSettings",
    "HandoffWebhookSettings",
    "HoursSettings",
    "HybridSettings",
    "HydeSettings",
    "KnowledgeSettings",
    "LLMSettings",
    "LadderSettings",
    "LastResortSettings",
    "LimitSettings",
    "LintSettings",
    "LogSettings",
    "Mode",
    "NotifySettings",
    "OpenAIEmbeddingSettings",
    "PassageSettings",
    "PiiKind",
    "PrivacySettings",
    "PromptSettings",
    "RetrievalSettings",
    "RewriteSettings",
    "RoutingSettings",
    "Settings",
    "SparseSettings",
    "SplittingSettings",
    "Strict",
    "TranslateSettings",
    "TypeaheadSettings",
    "UISettings",
    "WidgetSettings",
    "check_mode",
    "check_template",
    "default_of",
    "load_settings",
]

MODE_ENV = "KBBOT_MODE"
DEFAULT_KB = "default"  # the name of the knowledge base the top level of config.yaml describes


class LogSettings(Strict):
    """The conversation log (questions, hits, answers, feedback): a SQLite file under ``state_dir``, or PostgreSQL."""

    enabled: bool = True
    """Log every turn (question, hits, strategy, answer, feedback); never keys, headers or logins."""
    backend: Literal["sqlite", "postgres"] = "sqlite"
    """sqlite: the file at ``path``; postgres: the server in ``postgres`` (shared by replicas; docs/web-app.md)."""
    postgres: PostgresSettings = Field(default_factory=PostgresSettings)
    """The PostgreSQL server of ``backend: postgres``; its DSN only from the environment."""
    path: str = "log/turns.sqlite"
    """Relative to state_dir (an absolute path is used as is)."""
    retention_days: int = Field(default=90, ge=0)
    """Turns older than this many days are deleted (0 = keep forever)."""
    retention_rows: int = Field(default=100_000, ge=0)
    """Only the newest this many turns are kept (0 = no limit)."""
    analytics_top: int = Field(default=20, ge=1)
    """Rows in the analytics page's top / trending / unanswered tables."""
    analytics_sample: int = Field(default=20_000, ge=100)
    """How many of the newest turns in the chosen range the analytics latency percentiles read (their JSON timings
    are per turn; 20k keeps p95 within ~1%)."""
    outcomes: OutcomeSettings = Field(default_factory=OutcomeSettings)
    topics: TopicSettings = Field(default_factory=TopicSettings)


PiiKind = Literal["email", "id_card", "bank_card", "mobile", "landline"]
PII_KINDS: tuple[PiiKind, ...] = ("email", "id_card", "bank_card", "mobile", "landline")
DEFAULT_REFUSAL = (
    "为了保护您的隐私，请不要发送手机号、身份证号、银行卡号、邮箱等个人信息；去掉这些内容后再问一次吧。"
    "/ To protect your privacy, please do not send phone, ID-card or bank-card numbers or e-mail addresses; "
    "ask again without them."
)


class PrivacySettings(Strict):
    """Personal data in what people type: masked in everything stored, optionally refused or hidden from the LLM."""

    mask: bool = True
    """Store personal data masked ("[mobile]") in the conversation log, the inbox, exports and analytics (never
    the raw text on disk)."""
    kinds: list[PiiKind] = Field(default_factory=lambda: list(PII_KINDS))
    """The built-in kinds to find: Chinese mobile and landline numbers, ID-card numbers, e-mail, bank-card
    numbers."""
    patterns: dict[str, str] = Field(default_factory=dict)
    """More kinds: name -> regular expression (Python syntax); a match is stored as [name], e.g.
    ``student_id: '(?<!\\d)20\\d{6}(?!\\d)'``."""
    mask_llm: bool = False
    """Also mask the question before it is searched and sent to the LLM (off: the LLM sees what the user typed)."""
    refuse: bool = False
    """Refuse a message that contains personal data with ``refusal`` (nothing searched, nothing sent to the LLM)."""
    refusal: str = DEFAULT_REFUSAL
    """The polite bilingual refusal."""

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
    """Everything config.yaml can hold; each block's description is its class docstring."""

    state_dir: str = ".state"
    """Generated state (indexes, trained models, jieba cache, the conversation log); git-ignored, safe to delete.
    Relative to the config file."""
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
    feedback: FeedbackSettings = Field(default_factory=FeedbackSettings)
    ui: UISettings = Field(default_factory=UISettings)
    typeahead: TypeaheadSettings = Field(default_factory=TypeaheadSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    api: APISettings = Field(default_factory=APISettings)
    widget: WidgetSettings = Field(default_factory=WidgetSettings)
    wecom: WeComSettings = Field(default_factory=WeComSettings)
    feishu: FeishuSettings = Field(default_factory=FeishuSettings)
    log: LogSettings = Field(default_factory=LogSettings)
    privacy: PrivacySettings = Field(default_factory=PrivacySettings)
    routing: RoutingSettings = Field(default_factory=RoutingSettings)
    knowledge_bases: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """More knowledge bases served by this one app: name (lower-case letters, digits, - and _) -> only the settings
    in which it differs from this file's top level (its own ``knowledge.path``, thresholds, ``prompt``, ...). The
    top level is the knowledge base ``default``. Each gets its own state folder (``<state_dir>/kb/<name>``: index,
    conversation log, inbox, history) and admin (``ui.admin.*_env`` default to ``KBBOT_ADMIN_USER_<NAME>`` /
    ``KBBOT_ADMIN_PASSWORD_<NAME>``); docs/knowledge-bases.md."""
    kb_name: str = Field(default=DEFAULT_KB, exclude=True)  # which of knowledge_bases these settings are
    base_dir: Path = Field(default=Path("."), exclude=True)
    source: Path | None = Field(default=None, exclude=True)

    @field_validator("knowledge_bases")
    @classmethod
    def _knowledge_bases(cls, value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        import re

        for name, override in value.items():
            if not re.fullmatch(r"[a-z0-9_-]{1,40}", name) or name == DEFAULT_KB:
                raise ValueError(
                    f"knowledge base name {name!r}: use lower-case letters, digits, - and _ (at most 40), not "
                    f"{DEFAULT_KB!r} (the top level is {DEFAULT_KB!r})"
                )
            if "knowledge_bases" in override:
                raise ValueError(f"knowledge_bases.{name} cannot list knowledge bases itself; list them all at the top")
        return value

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


def validated(raw: dict[str, Any], where: str) -> Settings:
    """``raw`` as Settings, else a ConfigError starting with ``where`` that lists each bad key and why."""
    try:
        return Settings.model_validate(raw)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"])
            lines.append(f"  - {key}: {err['msg']}")
        raise ConfigError(f"{where}:\n" + "\n".join(lines)) from None


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
    settings = validated(raw, f"{path} has invalid settings")
    return finish_loading(settings, path.resolve().parent, path.resolve())


def finish_loading(settings: Settings, base_dir: Path, source: Path | None) -> Settings:
    """Validated settings of the config file ``source`` made ready: paths relative to ``base_dir`` (its folder),
    KBBOT_MODE applied."""
    settings = settings.model_copy(update={"base_dir": base_dir, "source": source})
    if settings.chitchat.path:  # relative to the config file, like every path in it
        chitchat = settings.chitchat.model_copy(update={"path": str(settings.resolve(settings.chitchat.path))})
        settings = settings.model_copy(update={"chitchat": chitchat})
    # The environment beats the file, so one config.yaml can serve several modes; CLI flags beat both.
    env_mode = os.environ.get(MODE_ENV, "").strip()
    if env_mode:
        retrieval = settings.retrieval.model_copy(update={"mode": check_mode(env_mode, MODE_ENV)})
        settings = settings.model_copy(update={"retrieval": retrieval})
    return settings
