"""What ``eval`` and ``calibrate`` measure: the knowledge (the configured folder, another folder or one file, indexed
apart from the user's), the modes and the question file."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bot.config.settings import MODES, Settings
from bot.config.variants import update, with_mode
from bot.errors import ConfigError, KnowledgeError
from bot.evaluation import EvalQuestion, load_questions, subsample
from bot.knowledge.entries import Entry, load_entries, parse_text

if TYPE_CHECKING:
    from bot.chat.bot import Bot


def add_measure_arguments(p) -> None:
    """Options ``eval`` and ``calibrate`` share: the questions (and a subset), the knowledge, the modes, splitting."""
    p.add_argument(
        "--questions",
        help='JSON lines: {"question", "gold_ids", "kind"?, "answer"?, "answers"?}; kind is answerable, '
        "unanswerable or chitchat (gold_ids [] for the last two)",
    )
    p.add_argument("--knowledge", help="a knowledge folder or one .json file (default: knowledge.path)")
    p.add_argument("--modes", help="comma-separated modes, e.g. sparse,dense,hybrid (default: the configured one)")
    p.add_argument("--no-split", action="store_true", help="do not split multi-part questions (on by default)")
    p.add_argument("--limit", type=int, default=None, help="a fixed random subset of N questions (seed 0)")


def read_knowledge(path: Path) -> list[Entry]:
    """Entries of a knowledge folder or of a single knowledge file (ids ``<file stem>:<key>``)."""
    if path.is_dir():
        return load_entries(path)
    if not path.is_file():
        raise ConfigError(f"知识库不存在 / knowledge not found: {path}")
    problems: list = []
    entries = parse_text(path.read_text(encoding="utf-8-sig"), path.stem, str(path), problems)
    if problems:
        raise KnowledgeError(problems)
    return entries


def derived(settings: Settings, knowledge: Path, state: Path, no_split: bool) -> Settings:
    """A copy of ``settings`` that indexes ``knowledge`` (a folder) into ``state``."""
    return update(
        settings,
        {
            "knowledge.path": str(knowledge.resolve()),
            "state_dir": str(state.resolve()),
            "splitting.enabled": settings.splitting.enabled and not no_split,
        },
    )


def eval_settings(settings: Settings, knowledge: str | None, no_split: bool) -> Settings:
    """Settings for measuring ``knowledge``: the user's own state for the configured folder, else a derived one.

    Other knowledge is indexed under ``<state_dir>/eval/<hash of its path>`` so the user's index is untouched
    and a second run reuses the first one's index.
    """
    own = settings.resolve(settings.knowledge.path).resolve()
    path = Path(knowledge).resolve() if knowledge else own
    if path == own:
        return derived(settings, own, settings.resolve(settings.state_dir), no_split)
    state = settings.resolve(settings.state_dir) / "eval" / hashlib.sha1(str(path).encode()).hexdigest()[:12]
    folder = path
    if path.is_file():
        # The index reads folders: link the one file into its own folder, keeping its stem (= the id prefix).
        folder = state / "knowledge"
        folder.mkdir(parents=True, exist_ok=True)
        link = folder / path.name
        if not link.exists():
            try:
                link.symlink_to(path)
            except OSError:
                link.write_bytes(path.read_bytes())
    return derived(settings, folder, state / "state", no_split)


def parse_modes(arg: str | None, settings: Settings) -> list[str]:
    """The modes to run, in the order given (default: the configured mode)."""
    modes = [m.strip() for m in (arg or settings.mode).split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise ConfigError(f"未知模式 / unknown mode(s): {', '.join(bad) or '(none)'}; choose from {', '.join(MODES)}")
    return list(dict.fromkeys(modes))


def bot_for(settings: Settings, mode: str, llm=None) -> Bot:
    """A bot over ``settings`` serving ``mode`` (checked by :func:`parse_modes`), with ``llm`` or none."""
    from bot.factory import build_bot

    return build_bot(with_mode(settings, mode), llm=llm)  # parse_modes has checked the mode already


@dataclass(frozen=True)
class Measured:
    """What a command measures: settings that index the knowledge, the questions (subsampled) and the entries."""

    settings: Settings
    questions: list[EvalQuestion]
    entries: list[Entry]


def load_measured(settings: Settings, args) -> Measured:
    """The knowledge and question file named by ``args``; ConfigError when the file is missing or unreadable."""
    if not args.questions:
        raise ConfigError("--questions FILE is required (eval --self-check needs none)")
    s = eval_settings(settings, args.knowledge, args.no_split)
    entries = read_knowledge(Path(args.knowledge) if args.knowledge else s.resolve(s.knowledge.path))
    try:
        questions = load_questions(args.questions, entries)
    except OSError as exc:
        raise ConfigError(f"无法读取问题文件 / cannot read the questions file: {exc}") from None
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return Measured(s, subsample(questions, args.limit), entries)
