"""The knowledge linter: defects an admin can fix before users hit them.

Every check is a pure function over entries (and, for the retrieval checks, a search function), so the CLI,
``eval --self-check`` and the tests run the very same code. Thresholds come from ``knowledge.lint`` settings.
"""

from __future__ import annotations

import math
import random
import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date

from bot.config.settings import LintSettings
from bot.knowledge.entries import Entry
from bot.knowledge.markup import markup_problems
from bot.knowledge.rules import NO_RULES, RuleSet, shadows
from bot.knowledge.validity import expiring
from bot.search.aliases import Alias
from bot.search.base import Hit
from bot.search.tokenizer import normalize

Search = Callable[[str, int], Sequence[Hit]]
SEARCH_DEPTH = 10  # hits read per question: the own entry's rank is reported when it is among them

SELF_RETRIEVAL = "self_retrieval"
NEAR_DUPLICATE = "near_duplicate"
MAGNET = "magnet"
EMPTY_DOCUMENT = "empty_document"
ONE_WORD_DOCUMENT = "one_word_document"
STOP_WORD_PHRASING = "stop_word_phrasing"
IMPORT_DUPLICATE = "import_duplicate"
RULE_ERROR = "rule_error"
RULE_SHADOWED = "rule_shadowed"
EXPIRING = "expiring"  # valid_until within knowledge.lint.expiring_days
MARKUP = "markup"  # a missing asset, a path out of the folder, a remote picture, a javascript: link, raw HTML
KINDS = (
    SELF_RETRIEVAL,
    NEAR_DUPLICATE,
    MAGNET,
    EMPTY_DOCUMENT,
    ONE_WORD_DOCUMENT,
    STOP_WORD_PHRASING,
    IMPORT_DUPLICATE,
    RULE_ERROR,
    RULE_SHADOWED,
    EXPIRING,
    MARKUP,
)

# Function words of questions (Chinese and English): a phrasing made only of these says nothing an index can match.
_STOP_TEXT = (
    "的 了 是 吗 呢 吧 啊 呀 么 嘛 哦 哈 我 你 您 他 她 它 我们 你们 他们 这 那 这个 那个 这些 那些 这里 那里 "
    "什么 怎么 怎样 怎么样 如何 为什么 为何 哪 哪里 哪儿 哪个 哪些 谁 几 多少 多 有 有没有 没有 在 和 与 及 或 或者 "
    "这是 那是 就是 还是 怎么办 是什么 有什么 什么样 这样 那样 一样 也 都 就 还 又 请 请问 问 一下 可以 能 能不能 会 要 想 知道 告诉 一个 个 些 是不是 对 给 让 把 被 "
    "a an the is are was were be do does did i you he she it we they me my your this that these those what "
    "how why where when who which whom to of in on at for with can could would should will please tell "
    "about and or not no yes so"
)
STOP_WORDS = frozenset(_STOP_TEXT.split())
_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)
_CJK_CHARS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_RUNS = re.compile(f"[{_CJK_CHARS}]+|[^\\W{_CJK_CHARS}_]+")
_CJK = re.compile(f"[{_CJK_CHARS}]")


@dataclass(frozen=True)
class Finding:
    """One flagged problem: its kind (KINDS), the entries involved (the subject first) and a readable detail."""

    kind: str
    entry_ids: tuple[str, ...]
    detail: str

    def to_dict(self) -> dict:
        """JSON form."""
        return {"kind": self.kind, "entry_ids": list(self.entry_ids), "detail": self.detail}


@dataclass(frozen=True)
class Collision:
    """A stored phrasing of ``entry_id`` that retrieves ``winner_id`` first (own rank ``rank``, 0 = not in top k)."""

    entry_id: str
    phrasing: str
    winner_id: str
    rank: int


def self_collisions(entries: Sequence[Entry], search: Search, top_k: int = SEARCH_DEPTH) -> list[Collision]:
    """Every stored question and phrasing whose top hit is another entry."""
    out: list[Collision] = []
    for entry in entries:
        for phrasing in dict.fromkeys(p for p in entry.phrasings if p.strip()):
            hits = search(phrasing, top_k)
            if not hits or hits[0].entry.id == entry.id:
                continue
            rank = next((i for i, h in enumerate(hits, 1) if h.entry.id == entry.id), 0)
            out.append(Collision(entry.id, phrasing, hits[0].entry.id, rank))
    return out


def collision_findings(collisions: Iterable[Collision]) -> list[Finding]:
    """Self-retrieval findings, one per colliding phrasing."""
    return [
        Finding(
            SELF_RETRIEVAL,
            (c.entry_id, c.winner_id),
            f"{c.phrasing!r} retrieves {c.winner_id} first (own rank {c.rank or '>top k'})",
        )
        for c in collisions
    ]


def bigrams(text: str) -> frozenset[str]:
    """Similarity features of a text: character bigrams of its CJK runs, whole words of everything else.

    Letter bigrams of English are shared by unrelated sentences ("how do i ..."): its words are the unit.
    """
    features: set[str] = set()
    for run in _RUNS.findall(normalize(text)):
        if _CJK.match(run) and len(run) > 1:
            features.update(run[i : i + 2] for i in range(len(run) - 1))
        else:
            features.add(run)
    return frozenset(features)


def _entry_text(entry: Entry) -> str:
    return f"{entry.query}\n{entry.document}"


def similar_pairs(texts: Sequence[frozenset[str]], threshold: float) -> list[tuple[int, int, float]]:
    """Pairs (i, j, Jaccard) of sets with Jaccard >= threshold, found by prefix filtering (no all-pairs loop).

    Two sets with Jaccard >= t share at least one of the first |s| - ceil(t |s|) + 1 elements of each, taken in
    one global order (rarest first): only pairs sharing such an element are compared.
    """
    df = Counter(g for s in texts for g in s)
    postings: dict[str, list[int]] = defaultdict(list)
    found: list[tuple[int, int, float]] = []
    for i, s in enumerate(texts):
        if not s:
            continue
        ordered = sorted(s, key=lambda g: (df[g], g))
        prefix = ordered[: len(s) - math.ceil(threshold * len(s)) + 1]
        candidates = {j for g in prefix for j in postings[g]}
        for j in sorted(candidates):
            other = texts[j]
            score = len(s & other) / len(s | other)
            if score >= threshold:
                found.append((j, i, score))
        for g in prefix:
            postings[g].append(i)
    return found


def near_duplicates(entries: Sequence[Entry], threshold: float) -> list[Finding]:
    """Pairs of entries whose question and document together share >= ``threshold`` of their char bigrams."""
    sets = [bigrams(_entry_text(e)) for e in entries]
    return [
        Finding(
            NEAR_DUPLICATE,
            (entries[i].id, entries[j].id),
            f"{entries[i].query!r} and {entries[j].query!r}: bigram Jaccard {score:.2f} (>= {threshold})",
        )
        for i, j, score in similar_pairs(sets, threshold)
    ]


def document_findings(entries: Sequence[Entry], tokenize: Callable[[str], list[str]]) -> list[Finding]:
    """Entries whose document is empty, or holds a single distinct word."""
    out: list[Finding] = []
    for e in entries:
        words = set(tokenize(e.document))
        if not words:
            out.append(Finding(EMPTY_DOCUMENT, (e.id,), f"{e.query!r}: the document has no words"))
        elif len(words) == 1:
            out.append(Finding(ONE_WORD_DOCUMENT, (e.id,), f"{e.query!r}: the document is one word, {e.document!r}"))
    return out


def stop_word_phrasings(entries: Sequence[Entry], tokenize: Callable[[str], list[str]]) -> list[Finding]:
    """Phrasings (query or alternative question) made only of stop words, or of no word at all."""
    return [
        Finding(STOP_WORD_PHRASING, (e.id,), f"{p!r} has only stop words: nothing in it can be matched")
        for e in entries
        for p in e.phrasings
        if all(t in STOP_WORDS for t in tokenize(p))
    ]


def magnets(
    entries: Sequence[Entry],
    probes: Sequence[tuple[str, str | None]],
    search: Search,
    min_questions: int,
    share: float,
    max_coverage: float,
) -> list[Finding]:
    """Entries that are the top hit of many unrelated probe questions.

    A probe is (question, its own entry id or None). With an owner (other entries' phrasings) a win by any other
    entry is unrelated; without (questions from the log) a win is unrelated when the winner covers less than
    ``max_coverage`` of the question (the hit's relevance): it won on a word or two, not on the question.
    """
    wins: Counter[str] = Counter()
    # The example quoted is the least covered win: the first one found may be a question the entry does answer.
    examples: dict[str, tuple[float, str]] = {}
    for question, owner in probes:
        hits = search(question, 1)
        if not hits:
            continue
        top = hits[0]
        unrelated = top.entry.id != owner if owner is not None else top.relevance < max_coverage
        if unrelated:
            wins[top.entry.id] += 1
            examples[top.entry.id] = min(examples.get(top.entry.id, (math.inf, "")), (top.relevance, question))
    need = max(min_questions, math.ceil(share * len(probes)))
    by_id = {e.id: e for e in entries}
    return [
        Finding(
            MAGNET,
            (entry_id,),
            f"{by_id[entry_id].query!r} tops {count} of {len(probes)} unrelated questions, e.g. {examples[entry_id][1]!r}"
            if entry_id in by_id
            else f"tops {count} of {len(probes)} unrelated questions",
        )
        for entry_id, count in wins.most_common()
        if count >= need
    ]


def sample_probes(entries: Sequence[Entry], size: int, seed: int = 0) -> list[tuple[str, str | None]]:
    """Up to ``size`` stored phrasings with their owners, a fixed random sample (the probes without a log)."""
    probes: list[tuple[str, str | None]] = [(p, e.id) for e in entries for p in e.phrasings if p.strip()]
    if len(probes) > size:
        probes = random.Random(seed).sample(probes, size)
    return probes


def expiring_findings(entries: Sequence[Entry], today: date, days: int) -> list[Finding]:
    """Published entries that stop answering within ``days`` days of ``today`` (their ``valid_until``)."""
    return [
        Finding(
            EXPIRING, (e.id,), f"{e.query!r} answers until {e.valid_until} (within {days} days); extend or retire it"
        )
        for e in sorted(expiring(entries, today, days), key=lambda e: (e.valid_until or "", e.id))
    ]


def import_duplicates(incoming: Sequence[Entry], existing: Sequence[Entry], threshold: float) -> list[Finding]:
    """Entries of an import that repeat each other or an existing entry (same phrasing, or near-duplicates).

    An existing entry with the same id is not a duplicate: the import replaces it.
    """
    out: list[Finding] = []
    incoming_ids = {e.id for e in incoming}
    others = [e for e in existing if e.id not in incoming_ids]
    first: dict[str, str] = {}
    for e in [*others, *incoming]:
        for p in e.phrasings:
            key = _NON_WORD.sub("", normalize(p))
            if not key:
                continue
            if key in first and first[key] != e.id and e.id in incoming_ids:
                out.append(Finding(IMPORT_DUPLICATE, (e.id, first[key]), f"same question as {first[key]}: {p!r}"))
            first.setdefault(key, e.id)
    flagged = {frozenset(f.entry_ids) for f in out}
    pool = [*others, *incoming]
    for f in near_duplicates(pool, threshold):
        if set(f.entry_ids) & incoming_ids and frozenset(f.entry_ids) not in flagged:
            out.append(Finding(IMPORT_DUPLICATE, f.entry_ids, f.detail))
    return out


def markup_findings(entries: Sequence[Entry], exists: Callable[[str], bool]) -> list[Finding]:
    """What is wrong with the documents' Markdown: a missing asset (``exists`` says which are there), a path out of
    the assets folder, a remote picture, an unsafe link, raw HTML (each shown neutralised, never run)."""
    return [
        Finding(MARKUP, (e.id,), f"{e.query!r}: {problem}")
        for e in entries
        for text in dict.fromkeys((e.document, *(t for _, t in e.variants)))
        for problem in markup_problems(text, exists)
    ]


def rule_findings(rules: RuleSet) -> list[Finding]:
    """The rules left out of the load (each with its file and line), and the rules an earlier one shadows."""
    out = [Finding(RULE_ERROR, (), str(problem)) for problem in rules.problems]
    out += [Finding(RULE_SHADOWED, (s.rule.entry_id, s.by.entry_id), s.describe()) for s in shadows(rules.rules)]
    return out


@dataclass(frozen=True)
class AliasNote:
    """An alias the knowledge defines (searched like a synonym), as the linter lists it: not a defect, but one to
    read; ``dropped`` when the synonym file's ``!`` line removes it."""

    alias: Alias
    dropped: bool = False

    def to_dict(self) -> dict:
        """JSON form."""
        a = self.alias
        return {
            "alias": a.alias,
            "name": a.name,
            "entry_id": a.entry,
            "how": a.how,
            "evidence": a.evidence,
            "dropped": self.dropped,
        }


def alias_notes(aliases: Iterable[tuple[Alias, bool]]) -> tuple[AliasNote, ...]:
    """The mined aliases as (alias, dropped by the synonym file) pairs, as notes."""
    return tuple(AliasNote(a, dropped) for a, dropped in aliases)


@dataclass(frozen=True)
class LintReport:
    """What the linter found on ``entries`` entries, probing magnets with ``probes`` questions from ``probe_source``,
    and the aliases the knowledge defines (listed, not findings: they do not change the exit status)."""

    findings: tuple[Finding, ...]
    entries: int
    probes: int
    probe_source: str
    seconds: float
    aliases: tuple[AliasNote, ...] = ()

    def to_dict(self) -> dict:
        """JSON form."""
        counts = Counter(f.kind for f in self.findings)
        return {
            "entries": self.entries,
            "probes": self.probes,
            "probe_source": self.probe_source,
            "seconds": round(self.seconds, 3),
            "counts": {k: counts[k] for k in KINDS if counts[k]},
            "findings": [f.to_dict() for f in self.findings],
            "aliases": [a.to_dict() for a in self.aliases],
        }


def lint(
    entries: Sequence[Entry],
    search: Search,
    tokenize: Callable[[str], list[str]],
    options: LintSettings,
    log_questions: Sequence[str] = (),
    aliases: Sequence[AliasNote] = (),
    rules: RuleSet = NO_RULES,
    today: date | None = None,
    assets: Callable[[str], bool] | None = None,
) -> LintReport:
    """Run every knowledge check; magnets are probed with ``log_questions`` when given, else a phrasing sample.
    ``aliases`` (mined from the knowledge) are listed in the report as they are; ``rules`` (the rules file as
    loaded) are checked too; entries expiring soon after ``today`` (the knowledge's time zone) are flagged; the
    documents' markup is checked, with ``assets`` saying which assets are there (None: every one is)."""
    start = time.perf_counter()
    results: dict[str, Sequence[Hit]] = {}

    def cached(question: str, top_k: int) -> Sequence[Hit]:
        # The magnet probes are mostly the phrasings self-retrieval searched already: search each text once.
        if question not in results:
            results[question] = search(question, SEARCH_DEPTH)
        return results[question][:top_k]

    findings = collision_findings(self_collisions(entries, cached))
    findings += near_duplicates(entries, options.near_duplicate)
    if log_questions:
        probes: list[tuple[str, str | None]] = [(q, None) for q in log_questions[: options.probe_sample]]
        source = "log"
    else:
        probes, source = sample_probes(entries, options.probe_sample), "sample"
    findings += magnets(
        entries,
        probes,
        cached,
        options.magnet_min_questions,
        options.magnet_share,
        options.magnet_max_coverage,
    )
    findings += document_findings(entries, tokenize)
    findings += stop_word_phrasings(entries, tokenize)
    findings += rule_findings(rules)
    findings += expiring_findings(entries, today or date.today(), options.expiring_days)
    findings += markup_findings(entries, assets or (lambda name: True))
    return LintReport(tuple(findings), len(entries), len(probes), source, time.perf_counter() - start, tuple(aliases))
