"""Settings of the knowledge files: where they live, how their text is cut, and the knowledge linter."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from bot.config.base import Strict, check_time_zone
from bot.config.operating import PublisherAccount, ReplaySettings


class LintSettings(Strict):
    """Thresholds of ``python -m bot knowledge lint`` (measured in BENCHMARKS.md "Knowledge linter")."""

    near_duplicate: float = Field(default=0.85, gt=0, le=1)
    """Two entries whose query + document share at least this share of their character bigrams (Jaccard) are
    reported as near duplicates."""
    magnet_min_questions: int = Field(default=3, ge=1)
    """A magnet tops at least this many unrelated probe questions (and at least ``magnet_share`` of them)."""
    magnet_share: float = Field(default=0.02, ge=0, le=1)
    """A magnet tops at least this share of the unrelated probe questions."""
    magnet_max_coverage: float = Field(default=0.5, gt=0, le=1)
    """A probe question is "unrelated" to its top hit when the hit covers less than this share of it (sparse
    relevance)."""
    probe_sample: int = Field(default=2000, ge=1)
    """Probe questions: this many newest log questions, or (no log) a fixed sample of the entries' own phrasings."""
    expiring_days: int = Field(default=14, ge=0)
    """Entries whose ``valid_until`` falls within this many days are listed (expiring soon)."""


class AssetSettings(Strict):
    """The pictures and files documents show (``knowledge/assets/``; docs/knowledge.md "Pictures and files")."""

    max_mb: float = Field(default=5, gt=0)
    """An asset larger than this is refused on upload and never served (the upload itself is capped by
    ``limits.max_upload_mb``)."""
    public_url: str | None = None
    """The address people reach this app at (e.g. ``https://kb.example.org``), for absolute links to the assets in
    WeCom and Feishu replies and the API's ``kbbot.assets``. null: the API uses the address a request came to, and
    IM replies name a picture by its alt text only."""

    @property
    def max_bytes(self) -> int:
        """``max_mb`` in bytes."""
        return int(self.max_mb * 1024 * 1024)

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("public_url must start with http:// or https://")
        return value.rstrip("/") if value else None


class KnowledgeSettings(Strict):
    """Where the knowledge JSON files live and how their text is cut."""

    path: str = "knowledge"
    """Folder of the knowledge: every ``*.json`` under it is loaded (object form ``{"id": {...}}`` or a list of
    entries). Relative to the config file."""
    user_dict: str | None = None
    """Optional jieba user dictionary (one "word [freq] [tag]" per line) for domain terms; null = none."""
    synonyms: str | None = None
    """Synonym groups, one per line, comma-separated ("中大, 中山大学"), relative to the config file; a missing file
    = none. A question word of a group also matches the group's other words (sparse), dense questions get the
    group's first word (``retrieval.dense.synonyms``), and every word joins jieba's dictionary. Re-read when edited
    (no re-index). BENCHMARKS.md "Synonyms"."""
    aliases: bool = True
    """Find the abbreviations and other names the entries define (中山大学，简称“中大”; 又称/别称/英文缩写 ...;
    English names in brackets; an entry asking for a name's abbreviation) and search them like synonym groups, from
    the first index on and anew at each reload. ``knowledge lint`` lists them; a line ``!中大`` in the synonym file
    drops a wrong one. docs/knowledge.md "Aliases"."""
    lint: LintSettings = Field(default_factory=LintSettings)
    assets: AssetSettings = Field(default_factory=AssetSettings)
    rules_timeout: float = Field(default=0.1, gt=0, le=5)
    """Seconds the regex rules of ``rules.yaml`` may take together on one message; a regex still running then is
    skipped (logged with its file and line) and the ladder goes on, so a pattern that backtracks forever cannot
    stall a turn. docs/knowledge.md "Rules"."""
    negative_similarity: float = Field(default=0.3, ge=0.0, le=1.0)
    """An entry's ``negative_questions`` block it for a message that overlaps one of them by at least this
    (character-bigram Dice) and more than any of the entry's own phrasings (bot/chat/negatives.py)."""
    history_versions: int = Field(default=20, ge=0)
    """Earlier versions kept per knowledge file by every edit (under ``state_dir``/history); 0 keeps none."""
    shared: Literal["none", "postgres"] = "none"
    """none: the knowledge folder is the knowledge; postgres: the knowledge (and its history) lives in the
    PostgreSQL database of ``log.postgres`` and each replica's folder is a copy of it, so an edit on any replica is
    answered by every other from its next message (docs/deployment.md). The first replica to start fills an empty
    database from its folder; after that the database wins over local files."""
    timezone: str = "Asia/Shanghai"
    """The time zone of the entries' ``valid_from`` / ``valid_until`` dates: an entry answers from the start of its
    first day to the end of its last day there."""
    replay: ReplaySettings = Field(default_factory=ReplaySettings)
    require_approval: bool = False
    """Publishing from the admin page (a draft, a change to a published entry, a deletion, an import) needs a
    publisher's login (/publisher/login); an admin without one saves new entries and drafts only."""
    publishers: list[PublisherAccount] = Field(default_factory=list)
    """Who may publish when ``require_approval`` is on (name and scrypt password hash)."""

    _zone = field_validator("timezone")(staticmethod(check_time_zone))


class RoutingSettings(Strict):
    """This knowledge base among several (``knowledge_bases``): its display name, and where a question it finds
    nothing for may go (docs/knowledge-bases.md)."""

    label: str = ""
    """The name people see ("招生 / Admissions"): in the notice on answers another knowledge base gave, and the
    page of this one. Empty: the knowledge base's name."""
    route_to: str = ""
    """Another knowledge base asked when this one finds nothing (the ladder would give its last-resort reply); its
    answer is labelled with that knowledge base's label. One hop only: the other one's own ``route_to`` is not
    followed. Empty: no routing. Each entry of ``knowledge_bases`` starts without it (it is not taken from the top
    level), so ``route_to: hr`` at the top level routes the default to hr, and hr nowhere."""
