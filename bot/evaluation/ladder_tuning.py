"""Choosing the clarify margin, the confirm band, the ladder's answer threshold and the agreement weights from
labelled questions.

Each question's ranked hits are replayed through the two middle rungs exactly as bot/chat/steps/knowledge.py
runs them: two passing candidates within the margin of the top one → clarify, offering the passing candidates
up to ``MAX_OPTIONS`` (resolved when a gold entry is among them); nothing passes but candidates are within the
band below the threshold → confirm, offering those candidates up to ``MAX_OPTIONS`` ("您是想问「X」吗？" for one,
"我不太确定，您是想问：" for several; resolved when a gold entry is among them); otherwise answer the top passing hit
or fall back. The triple chosen has the lowest cost (a wrong answer 1, an answerable question that falls back
``MISS_COST``, or ``OFFERED_COST`` when its entry is among the fallback's "did you mean", a question asked back
``ASK_COST``, or ``BLIND_ASK_COST`` when no gold entry is among its options) among those that ask back at most
``MAX_ASKED`` of the questions; either rung may come out off (None). The answer threshold may rise above the
best-F1 one by up to ``MAX_RAISE``: with "did you mean" options and a confirmation below it, answering less often
costs less than answering wrong.

A fallback whose best candidate is within the ``unsure`` band below the threshold words its "did you mean" as
"我不太确定，您是想问：" instead of "nothing found": :func:`tune_unsure` picks the widest band in which those options
hold a gold entry for at least ``UNSURE_TRUE`` of the answerable questions (the wording changes no decision).

A case that keeps each hit's agreement signals (bot/search/agreement.py) can be replayed with other agreement
weights (:func:`rescored`); :func:`tune_weights` chooses them with the rest, one weight at a time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields

import numpy as np

from bot.config.retrieval import AgreementWeights, CutoffSettings
from bot.config.settings import default_of
from bot.search.agreement import adjusted
from bot.search.crosslingual import TRANSLATED
from bot.search.language import CROSS_LANGUAGE

ASK_COST = 0.35  # a question asked back costs the user a click: about a third of a wrong answer
BLIND_ASK_COST = 0.6  # asked back with no right option: a click, then still no answer
MISS_COST = 0.5  # an answerable question that gets the fallback with no right "did you mean"
# ... with its entry among the fallback's "did you mean": a click, under a reply that says nothing was found (real
# visitors read that and leave: the right entry first in the list below "抱歉，知识库中没有找到" was the complaint)
OFFERED_COST = 0.45
SUGGESTED = 3  # the fallback's "did you mean" entries: the closest ones (fallback.last_resort.suggestions)
MAX_ASKED = 0.15  # clarify + confirm on at most this share of messages (the goal on real visitors' messages)
MAX_OPTIONS = 3
MAX_RAISE = 15  # hundredths the answer threshold may rise above the best-F1 (or configured) threshold
MARGINS: tuple[float | None, ...] = (None, *(round(0.005 * k, 3) for k in range(0, 21)))  # off, 0 … 0.10
BANDS: tuple[float | None, ...] = (None, *(round(0.01 * k, 2) for k in range(1, 16)))  # off, 0.01 … 0.15
TRANSLATED_MARGIN = default_of(CutoffSettings, "translated")  # a dictionary-searched message answers as any other


@dataclass(frozen=True)
class Case:
    """One labelled question: its hits as (entry id, relevance), best first, and its gold ids (empty: none); with
    ``signals`` (one mapping per hit, holding ``base`` and the agreement signals) it replays other weights."""

    hits: tuple[tuple[str, float], ...]
    gold: frozenset[str]
    signals: tuple[Mapping[str, float], ...] = ()
    several: bool = False  # the question asks for several of a kind (bot/chat/several.py)


def rescored(case: Case, weights: AgreementWeights) -> Case:
    """``case`` with each hit's relevance recomputed from its base relevance and agreement signals under
    ``weights``, ranked again (hits without signals keep theirs)."""
    if not case.signals:
        return case
    scored = [
        (entry_id, adjusted(signals["base"], signals, weights) if "base" in signals else relevance, signals)
        for (entry_id, relevance), signals in zip(case.hits, case.signals)
    ]
    scored.sort(key=lambda h: -h[1])  # stable: the retrieval order among equals
    return Case(tuple((i, r) for i, r, _ in scored), case.gold, tuple(s for *_, s in scored), case.several)


@dataclass(frozen=True)
class Rungs:
    """The rungs a replay decides with beside the answer cut, clarify margin and confirm band, which calibrate
    keeps as configured on both sides of a comparison and while it tunes the others: ``settle``, ``settle_dense``,
    ``together`` (None: off), ``contrast`` (False: off) and ``translated`` (None: a message searched through the
    dictionary never answers), as :func:`replay` reads them."""

    settle: float | None = None
    settle_dense: float | None = None
    contrast: bool = False
    together: float | None = None
    translated: float | None = TRANSLATED_MARGIN


NO_RUNGS = Rungs()


@dataclass(frozen=True)
class LadderOutcome:
    """Counts over a question set for one (answer threshold, margin, band)."""

    answer: float
    margin: float | None
    band: float | None
    right: int
    wrong: int
    clarified: int
    confirmed: int
    resolved: int  # clarify/confirm turns whose options hold a gold entry
    total: int
    missed: int = 0  # answerable questions that fell back with no right "did you mean"
    offered: int = 0  # answerable questions that fell back with a gold entry among the "did you mean"

    @property
    def asked(self) -> float:
        """Share of questions asked back (clarify + confirm)."""
        return (self.clarified + self.confirmed) / self.total if self.total else 0.0

    @property
    def cost(self) -> float:
        """Wrong answers, plus the misses and the questions asked back at their costs."""
        blind = self.clarified + self.confirmed - self.resolved
        return (
            self.wrong
            + MISS_COST * self.missed
            + OFFERED_COST * self.offered
            + ASK_COST * self.resolved
            + BLIND_ASK_COST * blind
        )

    def describe(self) -> str:
        """One line for the calibrate report."""
        n = self.total or 1
        asked = self.clarified + self.confirmed
        return (
            f"answer {self.answer:g} · clarify margin {_off(self.margin)} · confirm band {_off(self.band)}: wrong {100 * self.wrong / n:.1f}/100, "
            f"right {100 * self.right / n:.1f}/100, asked back {100 * self.asked:.1f}% "
            f"(gold in options {self.resolved}/{asked})"
        )


@dataclass(frozen=True)
class _Counts:
    """Decisions counted over a part of the questions; the answering and the falling-back parts add up to a
    :class:`LadderOutcome`."""

    right: int = 0
    wrong: int = 0
    clarified: int = 0
    confirmed: int = 0
    resolved: int = 0
    missed: int = 0
    offered: int = 0

    def __add__(self, other: _Counts) -> _Counts:
        return _Counts(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def outcome(self, answer: float, margin: float | None, band: float | None, total: int) -> LadderOutcome:
        """These counts as the outcome of (``answer``, ``margin``, ``band``) over ``total`` questions."""
        return LadderOutcome(answer, margin, band, total=total, **{f.name: getattr(self, f.name) for f in fields(self)})


class _Table:
    """Cases as arrays, for replaying thousands of threshold triples fast: each case's relevances best first
    (distinct entries, padded with -inf) and which of them are gold."""

    def __init__(self, cases: Sequence[Case]):
        width = max((len(c.hits) for c in cases), default=0) or 1
        self.relevance = np.full((len(cases), width), -np.inf)
        self.gold = np.zeros((len(cases), width), dtype=bool)
        self.said = np.zeros((len(cases), width))  # each candidate's q_backward (0 without signals)
        self.covered = np.zeros((len(cases), width))  # and its q_forward
        self.meant = np.full((len(cases), width), np.nan)  # and its question cosine (NaN without a dense side)
        self.across = np.zeros((len(cases), width))  # and whether it is in another language than the message
        self.contrast = np.zeros((len(cases), width), dtype=bool)  # and whether it contrasts a qualifier asked
        # whether the message's words were searched with their dictionary renderings (its best hit says so)
        self.translated = np.array([bool(c.signals and c.signals[0].get(TRANSLATED)) for c in cases], dtype=bool)
        for row, case in enumerate(cases):
            said = {i: s.get("q_backward", 0.0) for (i, _), s in zip(case.hits, case.signals)}
            covered = {i: s.get("q_forward", 0.0) for (i, _), s in zip(case.hits, case.signals)}
            meant = {i: s.get("question", np.nan) for (i, _), s in zip(case.hits, case.signals)}
            across = {i: s.get(CROSS_LANGUAGE, 0.0) for (i, _), s in zip(case.hits, case.signals)}
            contrast = {i: bool(s.get("contrast", 0.0)) for (i, _), s in zip(case.hits, case.signals)}
            hits = sorted(dict(reversed(case.hits)).items(), key=lambda h: -h[1])  # one per entry, its best
            for col, (entry_id, relevance) in enumerate(hits):
                self.relevance[row, col] = relevance
                self.gold[row, col] = entry_id in case.gold
                self.said[row, col] = said.get(entry_id, 0.0)
                self.covered[row, col] = covered.get(entry_id, 0.0)
                self.meant[row, col] = meant.get(entry_id, np.nan)
                self.across[row, col] = across.get(entry_id, 0.0)
                self.contrast[row, col] = contrast.get(entry_id, False)
        self.answerable = np.array([bool(c.gold) for c in cases], dtype=bool)
        self.several = np.array([c.several for c in cases], dtype=bool)
        width = self.relevance.shape[1]
        # any gold among the first k candidates, for k = 0 .. width
        self.gold_within = np.concatenate(
            [np.zeros((len(cases), 1), dtype=bool), np.logical_or.accumulate(self.gold, axis=1)], axis=1
        )
        self.top = self.relevance[:, 0]
        self.offered_fallback = self.gold_within[:, min(SUGGESTED, width)]
        self.total = len(cases)

    def outcome(
        self,
        answer: float,
        margin: float | None,
        band: float | None,
        settle: float | None = None,
        settle_dense: float | None = None,
        contrast: bool = False,
        together: float | None = None,
        translated: float | None = TRANSLATED_MARGIN,
    ) -> LadderOutcome:
        """The rungs' decisions with these thresholds (None: that rung off; ``translated`` None: a message searched
        through the dictionary never answers)."""
        return self.decide(answer, margin, band, Rungs(settle, settle_dense, contrast, together, translated))

    def decide(self, answer: float, margin: float | None, band: float | None, rungs: Rungs) -> LadderOutcome:
        """:meth:`outcome` with ``rungs``."""
        counts = self.answered(answer, margin, rungs) + self.fell_back(answer, band, rungs.translated)
        return counts.outcome(answer, margin, band, self.total)

    def answered(self, answer: float, margin: float | None, rungs: Rungs) -> _Counts:
        """The decisions on the questions with a candidate above the cut: answered, clarified, or offered when the
        answer contrasts a qualifier of the message (they depend on the margin, never on the band)."""
        r = rungs
        rows = np.arange(self.total)
        cut = self._cuts(answer, r.translated)
        passed = (self.relevance >= cut[:, None]).sum(axis=1)
        answering = passed > 0
        within = self.relevance >= np.maximum(cut, self.top - (margin or 0.0))[:, None]
        close = within.sum(axis=1) if margin is not None else 0
        clarify = answering & (close >= 2)
        options = self.gold_within[rows, np.minimum(passed, MAX_OPTIONS)]
        # the candidate answering: the top one, or the one a settled tie chose (the message says clearly more of it)
        chosen = np.zeros(self.total, dtype=int)
        grouped = np.zeros(self.total, dtype=bool)
        if r.together is not None and margin is not None:
            # a question asking for several whose close candidates each say enough of it: they answer together, the
            # one it says most of first (argmax: the first of equals, i.e. the more relevant)
            enough = np.where(within, self.covered, np.inf).min(axis=1) >= r.together
            grouped = clarify & self.several & enough
            chosen = np.where(grouped, np.argmax(np.where(within, self.said, -np.inf), axis=1), chosen)
            clarify = clarify & ~grouped
        if r.settle is not None and margin is not None and self.said.shape[1] > 1:
            said = np.where(within, self.said, -np.inf)
            ranked = np.argsort(-said, axis=1, kind="stable")
            with np.errstate(invalid="ignore"):  # -inf - -inf where fewer than two are close (not asked anyway)
                lead = said[rows, ranked[:, 0]] - said[rows, ranked[:, 1]]
            # ... and it covers no less of the message than any other close candidate
            covers = _no_less(self.covered, within, ranked[:, 0])
            settled = clarify & (lead >= r.settle) & covers
            if r.settle_dense is not None:
                # ... nor has a rival in its language whose question the dense side finds clearly closer
                first = ranked[:, 0]
                same = within & (self.across == self.across[rows, first][:, None])
                with np.errstate(invalid="ignore"):
                    closer = np.nan_to_num(self.meant - self.meant[rows, first][:, None], nan=-np.inf) >= r.settle_dense
                settled &= ~(same & closer).any(axis=1)
            chosen = np.where(settled, ranked[:, 0], chosen)
            clarify = clarify & ~settled
        if r.settle_dense is not None and margin is not None and self.meant.shape[1] > 1:
            # ... else the one the dense side finds clearly closer, whose question the message says no less of both ways
            dense = (~within | ~np.isnan(self.meant)).all(axis=1)  # every close candidate has a dense side
            meant = np.where(within & ~np.isnan(self.meant), self.meant, -np.inf)
            ranked = np.argsort(-meant, axis=1, kind="stable")
            with np.errstate(invalid="ignore"):
                lead = meant[rows, ranked[:, 0]] - meant[rows, ranked[:, 1]]
            no_less = _no_less(self.covered, within, ranked[:, 0]) & _no_less(self.said, within, ranked[:, 0])
            closer = clarify & dense & (lead >= r.settle_dense) & no_less
            chosen = np.where(closer, ranked[:, 0], chosen)
            clarify = clarify & ~closer
        direct = answering & ~clarify
        # the candidate answering names another qualifier than the message's: its passing candidates are offered
        contrasted = self.contrast[rows, chosen] | (grouped & (within & self.contrast).any(axis=1))
        offered = direct & contrasted if r.contrast else np.zeros(self.total, dtype=bool)
        direct &= ~offered
        return _Counts(
            right=int((direct & self.gold[rows, chosen]).sum()),
            wrong=int((direct & ~self.gold[rows, chosen]).sum()),
            clarified=int(clarify.sum()),
            confirmed=int(offered.sum()),
            resolved=int(((clarify | offered) & options).sum()),
        )

    def fell_back(self, answer: float, band: float | None, translated: float | None) -> _Counts:
        """The decisions on the questions with no candidate above the cut: confirmed within the band below it, else
        the fallback (they depend on the band, never on the margin)."""
        rows = np.arange(self.total)
        answering = (self.relevance >= self._cuts(answer, translated)[:, None]).any(axis=1)
        if band is not None:
            near = (self.relevance >= answer - band).sum(axis=1)
            confirm = ~answering & (near > 0)
            near_options = self.gold_within[rows, np.minimum(near, MAX_OPTIONS)]
        else:
            confirm = np.zeros(self.total, dtype=bool)
            near_options = confirm
        fallback = ~answering & ~confirm
        return _Counts(
            right=int((fallback & ~self.answerable).sum()),
            confirmed=int(confirm.sum()),
            resolved=int((confirm & near_options).sum()),
            missed=int((fallback & self.answerable & ~self.offered_fallback).sum()),
            offered=int((fallback & self.answerable & self.offered_fallback).sum()),
        )

    def _cuts(self, answer: float, translated: float | None) -> np.ndarray:
        """Each case's answer cut: a message searched through the dictionary answers only from ``translated`` above
        ``answer`` (never with None); its hits that reach ``answer`` but not that are near misses, as the bot's
        Cutoffs.passes and near_miss have it."""
        above = np.inf if translated is None else translated
        return np.where(self.translated, answer + above, answer)


def _no_less(values: np.ndarray, within: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Per case: the candidate ``first`` has no less of ``values`` than any candidate ``within`` the margin."""
    rows = np.arange(len(first))
    return (np.where(within, values, -np.inf) <= values[rows, first][:, None]).all(axis=1)


def replay(
    cases: Sequence[Case],
    answer: float,
    margin: float | None,
    band: float | None,
    settle: float | None = None,
    settle_dense: float | None = None,
    contrast: bool = False,
    together: float | None = None,
    translated: float | None = TRANSLATED_MARGIN,
) -> LadderOutcome:
    """The rungs' decisions on ``cases`` with these thresholds (None: that rung off); ``settle`` answers a tie
    whose one candidate's question the message says that much more of (``q_backward`` in the cases' signals),
    ``settle_dense`` one whose question the dense side finds that much closer (``question``) and the message says
    no less of both ways; with ``contrast``, a candidate about to answer that contrasts a qualifier of the message
    (signal ``contrast``) is offered with the other passing candidates instead; ``together`` answers a tie of a
    question asking for several (``several``) whose close candidates each say that much of it (``q_forward``);
    a question searched through the dictionary (signal ``translated``) answers only from ``translated`` above the
    cut (None: never)."""
    return decide(cases, answer, margin, band, Rungs(settle, settle_dense, contrast, together, translated))


def decide(
    cases: Sequence[Case], answer: float, margin: float | None, band: float | None, rungs: Rungs
) -> LadderOutcome:
    """The rungs' decisions on ``cases`` with these thresholds and ``rungs`` (:func:`replay`)."""
    return _Table(cases).decide(answer, margin, band, rungs)


def tune(cases: Sequence[Case], answer: float, rungs: Rungs = NO_RUNGS) -> LadderOutcome:
    """The (answer threshold ≥ ``answer``, margin, band) with the lowest cost that asks back at most
    ``MAX_ASKED`` of the questions, the others of ``rungs`` deciding as they are."""
    answers = [round(answer + k / 100, 3) for k in range(MAX_RAISE + 1)]
    table = _Table(cases)
    # A question either has a candidate above the cut (the margin decides it) or not (the band does): each part is
    # counted once per threshold and added up for every (margin, band), not replayed whole for each triple.
    outcomes = []
    for a in answers:
        fell_back = [table.fell_back(a, b, rungs.translated) for b in BANDS]
        for m in MARGINS:
            answered = table.answered(a, m, rungs)
            outcomes += [(answered + part).outcome(a, m, b, table.total) for b, part in zip(BANDS, fell_back)]
    allowed = [o for o in outcomes if o.asked <= MAX_ASKED] or [table.decide(answer, None, None, rungs)]
    return min(allowed, key=lambda o: (round(o.cost, 6), o.answer, (o.margin or 0.0) + (o.band or 0.0)))


# The values :func:`tune_weights` tries for each agreement weight (the shipped ones were chosen among them).
WEIGHT_STEPS: dict[str, tuple[float, ...]] = {
    "conflict": (0.0, 0.05, 0.1, 0.2, 0.3, 0.5),
    "other": (0.0, 0.03, 0.06, 0.1, 0.15),
    "added": (0.0, 0.02, 0.05, 0.1),
    "missing": (0.0, 0.02, 0.05),
    "backward": (0.0, 0.03, 0.06, 0.1, 0.2, 0.3),
    "forward": (0.0, 0.03, 0.06, 0.1),
    "content": (0.0, 0.25, 0.5, 0.75, 1.0),
    "match": (0.0, 0.1, 0.2, 0.3, 0.4),
    "unmet": (0.0, 0.02, 0.05, 0.1, 0.2, 0.3),
    "across": (0.0, 0.02, 0.03, 0.05),
    "unnamed": (0.0, 0.01, 0.02, 0.03, 0.05, 0.1),
    "named": (0.0, 0.05, 0.1, 0.15),
    "inside": (0.0, 0.25, 0.5, 0.75, 1.0),
}
ROUNDS = 2


def tune_weights(
    cases: Sequence[Case], answer: float, start: AgreementWeights | None = None, rungs: Rungs = NO_RUNGS
) -> tuple[AgreementWeights, LadderOutcome]:
    """The agreement weights and ladder (:func:`tune` from ``answer``, with ``rungs``) with the lowest cost on
    ``cases``: from ``start`` (default all 0), each weight in turn set to the step of ``WEIGHT_STEPS`` that lowers
    the cost most, for ``ROUNDS`` rounds; a tie keeps the smaller weight."""
    weights = start or AgreementWeights()

    def outcome(w: AgreementWeights) -> LadderOutcome:
        return tune([rescored(c, w) for c in cases], answer, rungs)

    best = outcome(weights)
    for _ in range(ROUNDS):
        for name, steps in WEIGHT_STEPS.items():
            for value in steps:
                trial = weights.model_copy(update={name: value})
                if trial == weights:
                    continue
                found = outcome(trial)
                if round(found.cost, 6) < round(best.cost, 6) or (
                    round(found.cost, 6) == round(best.cost, 6) and value < getattr(weights, name)
                ):
                    weights, best = trial, found
    return weights, best


UNSURE_TRUE = 0.5  # "我不太确定，您是想问：" must offer a right entry at least this often on answerable questions
UNSURE_BANDS = tuple(round(0.01 * k, 2) for k in range(1, 16))


def tune_unsure(cases: Sequence[Case], outcome: LadderOutcome) -> float | None:
    """The widest band below ``outcome``'s answer threshold (0.01 … 0.15) in which at least ``UNSURE_TRUE`` of the
    fallbacks of ``cases`` (answerable or not) offer a gold entry among their ``SUGGESTED`` "did you mean"; None
    when no band does."""
    table = _Table(cases)
    passed = (table.relevance >= outcome.answer).sum(axis=1) > 0
    near_miss = (table.relevance >= outcome.answer - outcome.band).sum(axis=1) > 0 if outcome.band else 0
    fallback = ~passed & ~near_miss
    chosen = None
    for band in UNSURE_BANDS:
        unsure = fallback & (table.top >= outcome.answer - band)
        asked = unsure.sum()
        right = (unsure & table.answerable & table.offered_fallback).sum()
        if asked and right >= UNSURE_TRUE * asked:
            chosen = band
    return chosen


def _off(value: float | None) -> str:
    return "off" if value is None else f"{value:g}"
