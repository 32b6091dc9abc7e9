"""Exact-match rules: ``rules.yaml`` in the knowledge folder pins messages to entries, whatever the scores say.

The file is a YAML list, checked in order before the knowledge is searched; the first rule that matches answers::

    - exact: 校医院电话          # the whole message, normalised
      entry: campus:clinic_phone
    - contains: [退学, 休学]     # a piece of the message (a list: one rule per pattern)
      entry: policy:leave
    - regex: '^(学费|tuition)\\b'   # a search anywhere in the normalised message (the `regex` package)
      entry: fees:tuition

Messages and exact/contains patterns are compared after :func:`rule_form`; a regex is searched in the normalised
message as written, case-insensitively. A regex gets what is left of a per-message time budget and is skipped
(reported, the ladder goes on) when it runs out, so a pattern that backtracks forever cannot stall a turn. A bad
rule (unknown entry, a regex that does not compile, a wrong key) is left out and reported with its file and line;
the other rules and the knowledge load as usual. docs/knowledge.md "Rules".
"""

from __future__ import annotations

import time
import unicodedata
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import regex
import yaml

from bot.errors import KnowledgeProblem
from bot.knowledge.entries import RULES_FILE

Kind = Literal["exact", "contains", "regex"]
KINDS: tuple[Kind, ...] = ("exact", "contains", "regex")
ENTRY = "entry"
FLAGS = regex.IGNORECASE | regex.FULLCASE
_STR = "tag:yaml.org,2002:str"
Report = Callable[[int | None, str], None]  # records a problem at a line of the rules file (None: the whole file)


def rule_form(text: str) -> str:
    """``text`` as rules compare it: NFKC (full-width to half-width), case-folded, runs of whitespace as one space,
    and punctuation and spaces at either end removed ("  ＷｉＦｉ密码？" → "wifi密码")."""
    text = " ".join(unicodedata.normalize("NFKC", text).casefold().split())
    start, end = 0, len(text)
    while start < end and _edge(text[start]):
        start += 1
    while end > start and _edge(text[end - 1]):
        end -= 1
    return text[start:end]


def _edge(char: str) -> bool:
    return char.isspace() or unicodedata.category(char).startswith("P")


@dataclass(frozen=True)
class Rule:
    """One pattern of the rules file: its kind (exact, contains, regex), the pattern as written, the entry it
    answers with, and where it is (file and 1-based line)."""

    kind: Kind
    pattern: str
    entry_id: str
    file: str
    line: int
    text: str = ""  # the pattern normalised (exact and contains)
    compiled: regex.Pattern | None = field(default=None, compare=False, repr=False)  # a regex rule's

    @property
    def where(self) -> str:
        """``file:line``, as an editor opens it."""
        return f"{self.file}:{self.line}"

    def describe(self) -> str:
        """Human form, e.g. "contains '退学' → policy:leave (knowledge/rules.yaml:4)"."""
        return f"{self.kind} {self.pattern!r} → {self.entry_id} ({self.where})"

    def to_dict(self) -> dict:
        """JSON form (the API's ``kbbot.rule``): kind, pattern, entry id and line (not the file: a server path)."""
        return {"kind": self.kind, "pattern": self.pattern, "id": self.entry_id, "line": self.line}

    def matches(self, said: str, timeout: float) -> bool:
        """True when the normalised message ``said`` matches; TimeoutError when a regex runs past ``timeout``."""
        if self.kind == "exact":
            return said == self.text
        if self.kind == "contains":
            return self.text in said
        assert self.compiled is not None  # every loaded regex rule is compiled
        return self.compiled.search(said, timeout=timeout) is not None


@dataclass(frozen=True)
class RuleMatch:
    """What the rules made of one message: the rule that matched (None: none) and the regex rules that ran out of
    time (skipped; the ones after the budget ran out included)."""

    rule: Rule | None
    timed_out: tuple[Rule, ...] = ()


@dataclass(frozen=True)
class RuleSet:
    """The loaded rules in file order and the problems of the ones left out."""

    rules: tuple[Rule, ...] = ()
    problems: tuple[KnowledgeProblem, ...] = ()

    def match(self, message: str, timeout: float) -> RuleMatch:
        """The first rule ``message`` matches; the regex rules share ``timeout`` seconds between them."""
        said = rule_form(message) if self.rules else ""  # no rules file: nothing to compute
        if not said:
            return RuleMatch(None)
        deadline = time.monotonic() + timeout
        late: list[Rule] = []
        for rule in self.rules:
            left = deadline - time.monotonic()
            if rule.kind == "regex" and left <= 0:
                late.append(rule)
                continue
            try:
                if rule.matches(said, max(left, 0.0)):
                    return RuleMatch(rule, tuple(late))
            except TimeoutError:
                late.append(rule)
        return RuleMatch(None, tuple(late))


NO_RULES = RuleSet()


def load_rules(folder: str | Path, entry_ids: Collection[str]) -> RuleSet:
    """The rules of ``folder``'s rules file for the entries ``entry_ids`` (none when it is absent); each bad rule
    is left out with a problem naming its file and line."""
    path = Path(folder) / RULES_FILE
    if not path.is_file():
        return NO_RULES
    file = str(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        return RuleSet(problems=(KnowledgeProblem(file, None, f"cannot read as UTF-8 text: {exc}"),))
    return parse_rules(text, file, entry_ids)


def parse_rules(text: str, file: str, entry_ids: Collection[str]) -> RuleSet:
    """The rules in ``text`` (the rules file ``file``) that are valid for ``entry_ids``, and the problems."""
    problems: list[KnowledgeProblem] = []

    def problem(line: int | None, why: str) -> None:
        problems.append(KnowledgeProblem(file if line is None else f"{file}:{line}", None, why))

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem(mark.line + 1 if mark is not None else None, f"invalid YAML: {getattr(exc, 'problem', None) or exc}")
        return RuleSet(problems=tuple(problems))
    except RecursionError:  # the composer recurses into nested collections
        problem(None, "invalid YAML: nested too deeply")
        return RuleSet(problems=tuple(problems))
    if root is None:
        return NO_RULES
    if not isinstance(root, yaml.SequenceNode):
        problem(_line(root), "the rules file must be a list of rules (- exact|contains|regex: ..., entry: <id>)")
        return RuleSet(problems=tuple(problems))
    rules: list[Rule] = []
    for item in root.value:
        rules += _rules_of(item, file, entry_ids, problem)
    return RuleSet(tuple(rules), tuple(problems))


def _line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


def _scalar(node: yaml.Node) -> str | None:
    """A plain or quoted scalar's text as written (``110`` and ``yes`` stay text), else None."""
    if isinstance(node, yaml.ScalarNode) and (node.tag == _STR or node.style is None):
        return node.value
    return None


def _rules_of(item: yaml.Node, file: str, entry_ids: Collection[str], problem: Report) -> list[Rule]:
    """The rules of one list item (one per pattern), or none with the problem reported."""
    line = _line(item)
    if not isinstance(item, yaml.MappingNode):
        problem(line, "a rule must be a mapping like {exact: 校医院电话, entry: campus:clinic}")
        return []
    fields: dict[str, yaml.Node] = {}
    for key_node, value in item.value:
        key = _scalar(key_node)
        if key not in (*KINDS, ENTRY):
            problem(_line(key_node), f"unknown key {key_node.value!r}; a rule has one of {', '.join(KINDS)} and entry")
            return []
        if key in fields:
            problem(_line(key_node), f"key {key!r} appears twice in this rule")
            return []
        fields[key] = value
    kinds = [k for k in KINDS if k in fields]
    if len(kinds) != 1:
        problem(line, f"a rule needs exactly one of {', '.join(KINDS)}, got {', '.join(kinds) or 'none'}")
        return []
    entry = _scalar(fields[ENTRY]) if ENTRY in fields else None
    if entry is None or not entry.strip():
        problem(line, "a rule needs the id of the entry it answers with: entry: <file stem>:<key>")
        return []
    entry = entry.strip()
    if entry not in entry_ids:
        problem(line, f"the rule answers with entry {entry!r}, which the knowledge does not have")
        return []
    kind = kinds[0]
    node = fields[kind]
    patterns = node.value if isinstance(node, yaml.SequenceNode) else [node]
    out: list[Rule] = []
    for pattern_node in patterns:
        pattern = _scalar(pattern_node)
        at = _line(pattern_node)
        if pattern is None:
            problem(at, f"the {kind} pattern must be text or a list of texts")
            continue
        rule = _rule(kind, pattern, entry, file, at, problem)
        if rule is not None:
            out.append(rule)
    return out


def _rule(kind: Kind, pattern: str, entry: str, file: str, line: int, problem: Report) -> Rule | None:
    if kind == "regex":
        if not pattern.strip():
            problem(line, "the regex is empty (it would match every message)")
            return None
        try:
            compiled = regex.compile(pattern, FLAGS)
        except (regex.error, ValueError, OverflowError, RecursionError) as exc:
            problem(line, f"the regex {pattern!r} does not compile: {exc}")
            return None
        return Rule(kind, pattern, entry, file, line, compiled=compiled)
    text = rule_form(pattern)
    if not text:
        problem(line, f"the {kind} pattern {pattern!r} is empty once normalised (spaces and punctuation only)")
        return None
    return Rule(kind, pattern, entry, file, line, text)


@dataclass(frozen=True)
class Shadow:
    """A rule that never answers: every message it matches, the earlier rule ``by`` matches first."""

    rule: Rule
    by: Rule

    def describe(self) -> str:
        """What the linter says, naming both rules and whether they answer with the same entry."""
        same = self.rule.entry_id == self.by.entry_id
        how = "is redundant (same entry)" if same else f"is shadowed: those messages get {self.by.entry_id}"
        return (
            f"{self.rule.where}: {self.rule.describe()} never answers; {self.by.describe()} matches first, so it {how}"
        )


# Seconds a regex gets when the linter tries it on a later exact rule's text; one that runs out counts as no match.
LINT_TIMEOUT = 0.05


def shadows(rules: Sequence[Rule]) -> list[Shadow]:
    """The rules an earlier rule covers: an exact or contains rule inside an earlier contains rule, an exact rule
    equal to an earlier one or matched by an earlier regex. A later regex is never reported (that would need
    comparing two regular languages; an exact rule after it still is)."""
    found: list[Shadow] = []
    for i, later in enumerate(rules):
        by = next((earlier for earlier in rules[:i] if _covers(earlier, later)), None)
        if by is not None:
            found.append(Shadow(later, by))
    return found


def _covers(earlier: Rule, later: Rule) -> bool:
    if later.kind == "regex":
        return False
    if earlier.kind == "exact":
        return later.kind == "exact" and later.text == earlier.text
    if earlier.kind == "contains":
        return earlier.text in later.text
    if later.kind != "exact":
        return False
    try:
        return earlier.matches(later.text, LINT_TIMEOUT)
    except TimeoutError:
        return False
