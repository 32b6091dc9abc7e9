"""Settings are frozen; a variant is a copy with one key changed (bot.config.variants), the original untouched."""

from __future__ import annotations

import copy
import pickle

import pytest
from pydantic import ValidationError

from bot.config.settings import CutoffSettings, Settings, load_settings
from bot.config.variants import replace, update, with_mode
from bot.errors import ConfigError
from tests.support.knowledge import ROOT, with_cutoffs

pytestmark = pytest.mark.unit


@pytest.fixture
def shipped(monkeypatch) -> Settings:
    monkeypatch.delenv("KBBOT_MODE", raising=False)
    return load_settings(ROOT / "config.yaml")


def test_settings_cannot_be_changed_in_place(shipped):
    with pytest.raises(ValidationError, match="frozen"):
        shipped.retrieval.mode = "sparse"  # type: ignore[misc]
    with pytest.raises(ValidationError, match="frozen"):
        shipped.state_dir = "elsewhere"  # type: ignore[misc]


def test_thresholds_cannot_be_changed_in_place_and_a_variant_leaves_them_alone(shipped):
    thresholds = shipped.retrieval.thresholds
    shipped_sparse = thresholds["sparse"]
    with pytest.raises(TypeError, match="bot.config.variants.replace"):
        thresholds["sparse"] = CutoffSettings(answer=0.1)  # type: ignore[index]
    with pytest.raises(TypeError, match="frozen"):
        thresholds.pop("sparse")  # type: ignore[attr-defined]
    variant = with_cutoffs(shipped, "sparse", 0.1)
    assert variant.retrieval.thresholds["sparse"].answer == 0.1 and thresholds["sparse"] is shipped_sparse
    assert variant.retrieval.thresholds["dense-e5"] is thresholds["dense-e5"]
    # copies and pickles stay read-only and equal (the ladder benchmark deep-copies settings)
    for copied in (copy.deepcopy(shipped), pickle.loads(pickle.dumps(shipped))):
        assert copied == shipped
        with pytest.raises(TypeError):
            copied.retrieval.thresholds.clear()  # type: ignore[attr-defined]
    assert load_settings(ROOT / "config.yaml").model_dump(mode="json")["retrieval"]["thresholds"]["sparse"]["answer"]


def test_replace_copies_the_path_down_to_the_key_and_shares_the_rest(shipped):
    variant = replace(shipped, "retrieval.dense.fasttext.dim", 16)
    assert variant.retrieval.dense.fasttext.dim == 16 and shipped.retrieval.dense.fasttext.dim == 50
    assert variant.retrieval.dense.encoder == shipped.retrieval.dense.encoder
    assert variant.llm is shipped.llm and variant.retrieval.sparse is shipped.retrieval.sparse  # untouched blocks
    assert (variant.base_dir, variant.source) == (shipped.base_dir, shipped.source)  # load_settings' own fields


def test_update_applies_every_change_in_order(shipped):
    variant = update(shipped, {"llm.model": "local", "llm.timeout": 2.0, "retrieval.mode": "sparse"})
    assert (variant.llm.model, variant.llm.timeout, variant.mode) == ("local", 2.0, "sparse")
    assert (shipped.llm.model, shipped.mode) == ("gpt-4o-mini", "hybrid")


@pytest.mark.parametrize(
    "path, named",
    [("retrieval.modes", "'modes'"), ("retrievl.mode", "'retrievl'"), ("retrieval.mode.x", "'mode' is a value")],
)
def test_a_wrong_path_is_an_error_naming_the_wrong_part(shipped, path, named):
    with pytest.raises(KeyError, match=named):
        replace(shipped, path, 1)


def test_with_mode_checks_the_mode_and_names_where_it_came_from(shipped):
    assert with_mode(shipped, "dense").retrieval.mode == "dense" and shipped.retrieval.mode == "hybrid"
    with pytest.raises(ConfigError, match="--mode is 'bogus'"):
        with_mode(shipped, "bogus", "--mode")
