"""Judging a retune: both sides decide with the rungs calibrate does not retune, as configured."""

from __future__ import annotations

import pytest

from bot.config.retrieval import AgreementWeights
from bot.evaluation.calibration import LadderChoice, worse_sets
from bot.evaluation.ladder_tuning import Case, Rungs
from bot.search.crosslingual import TRANSLATED

pytestmark = pytest.mark.unit

NONE = AgreementWeights()


def listed(gold: str, *hits: tuple[str, float, float]) -> Case:
    """A question asking for several whose close candidates each say ``q_forward`` of it."""
    signals = tuple({"q_forward": f, "q_backward": 0.5} for *_, f in hits)
    return Case(tuple((i, r) for i, r, _ in hits), frozenset({gold}), signals, True)


CANTEENS = [listed("rong", ("rong", 0.900, 0.8), ("li", 0.898, 0.8)) for _ in range(4)]


def test_a_choice_decides_with_the_rungs_it_keeps():
    asked = LadderChoice(0.8, 0.005, None, NONE).outcome(CANTEENS)
    together = LadderChoice(0.8, 0.005, None, NONE, Rungs(together=0.5)).outcome(CANTEENS)
    assert (asked.right, asked.clarified) == (0, 4) and (together.right, together.clarified) == (4, 0)


def test_a_retune_is_judged_with_the_kept_rungs_on_both_sides():
    # answering the top canteen without a margin is no better than answering them together: nothing is worse
    kept = LadderChoice(0.8, 0.005, None, NONE, Rungs(together=0.5))
    assert worse_sets({"visitors": CANTEENS}, kept, LadderChoice(0.8, None, None, NONE, Rungs(together=0.5))) == []
    # judged without the kept rung, the configured values would seem to ask back every one of these questions
    assert LadderChoice(0.8, 0.005, None, NONE).outcome(CANTEENS).cost > kept.outcome(CANTEENS).cost


def test_a_retune_is_judged_with_the_configured_dictionary_margin():
    # English questions answered through the dictionary 0.01 above the cut: the configured margin (0.02) offers
    # them, and a retune that lowers the cut by 0.02 must not be judged as if they answered already
    english = [Case((("a", 0.81), ("b", 0.70)), frozenset({"a"}), ({TRANSLATED: 1.0}, {TRANSLATED: 1.0}))] * 3
    configured = LadderChoice(0.8, None, 0.05, NONE, Rungs(translated=0.02))
    assert configured.outcome(english).right == 0
    assert LadderChoice(0.78, None, 0.05, NONE, Rungs(translated=0.02)).outcome(english).right == 3
    assert LadderChoice(0.78, None, 0.05, NONE, Rungs(translated=None)).outcome(english).right == 0
