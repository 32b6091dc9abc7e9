"""config.yaml validation for retrieval: modes, per-system thresholds, and keys the redesign removed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from bot.chat.answer import Cutoffs
from bot.config.settings import SYSTEMS, CutoffSettings, load_settings
from bot.config.variants import replace
from bot.errors import ConfigError
from bot.factory import build_bot
from tests.support.knowledge import ROOT, config_dict

pytestmark = pytest.mark.e2e


def write(tmp_path, raw: dict, name: str = "config.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return path


@pytest.fixture
def raw(tmp_path, kb_dir, monkeypatch) -> dict:
    monkeypatch.delenv("KBBOT_MODE", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return config_dict(tmp_path, kb_dir)


def run_cli(config, *args, **env):
    environ = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "KBBOT_MODE")}
    return subprocess.run(
        [sys.executable, "-m", "bot", "--config", str(config), *args],
        check=False,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**environ, **env},
        timeout=120,
    )


def test_the_shipped_config_has_thresholds_for_every_system():
    settings = load_settings(ROOT / "config.yaml")
    assert set(settings.retrieval.thresholds) == set(SYSTEMS)  # any mode with any encoder works out of the box


def test_an_unknown_system_under_thresholds_is_rejected_naming_the_valid_ones(tmp_path, raw):
    raw["retrieval"]["thresholds"]["dense-bert"] = {"answer": 0.8, "direct": None}
    with pytest.raises(ConfigError) as err:
        load_settings(write(tmp_path, raw))
    message = str(err.value)
    assert "retrieval.thresholds" in message and "dense-bert" in message
    assert all(system in message for system in SYSTEMS)


@pytest.mark.parametrize(
    "cutoffs, key",
    [
        ({"answer": 8.0, "direct": None}, "retrieval.thresholds.sparse.answer"),
        ({"answer": 0.5, "direct": 1.5}, "retrieval.thresholds.sparse.direct"),
        ({"answer": 0.5, "verbatim": 0.9}, "retrieval.thresholds.sparse.verbatim"),
    ],
)
def test_thresholds_are_relevances_in_0_1_with_known_keys(tmp_path, raw, cutoffs, key):
    raw["retrieval"]["thresholds"]["sparse"] = cutoffs  # e.g. an old BM25 threshold pasted in
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_settings(write(tmp_path, raw))


@pytest.mark.parametrize(
    "where, value, key",
    [
        (("retrieval", "sparse"), {"threshold": 12.1}, "retrieval.sparse.threshold"),
        (("retrieval", "dense"), {"threshold": 0.679}, "retrieval.dense.threshold"),
        (("retrieval", "sparse"), {"tantivy": {"boosts": {"query": 2.0}}}, "retrieval.sparse.tantivy"),
        (("retrieval", "hybrid"), {"rrf_k": 60}, "retrieval.hybrid.rrf_k"),
    ],
)
def test_keys_of_the_old_design_are_rejected_by_name(tmp_path, raw, where, value, key):
    raw[where[0]][where[1]].update(value)
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_settings(write(tmp_path, raw))


def test_a_mode_whose_system_has_no_thresholds_names_the_key_to_add(tmp_path, raw):
    """A file cannot leave a system out any more (its shipped cutoffs fill in), but settings built in code can."""
    raw["retrieval"]["dense"]["encoder"] = "e5"
    settings = load_settings(write(tmp_path, raw))
    thresholds = {k: v for k, v in settings.retrieval.thresholds.items() if k != "dense-e5"}
    settings = replace(settings, "retrieval.thresholds", thresholds)
    bot = build_bot(settings)  # the sparse mode: fine
    assert bot.retrieve("怎么添加知识")[1]
    for call in (
        lambda: bot.retrieve("怎么添加知识", "dense"),
        lambda: bot.search.mode_thresholds("dense"),
        lambda: bot.answer("怎么添加知识", mode="dense"),
    ):
        with pytest.raises(ConfigError) as err:
            call()
        assert "retrieval.thresholds" in str(err.value) and "`dense-e5: {answer: " in str(err.value)


def test_kbbot_mode_bogus_is_a_config_error_naming_the_variable(tmp_path, raw, monkeypatch):
    path = write(tmp_path, raw)
    monkeypatch.setenv("KBBOT_MODE", "bogus")
    with pytest.raises(ConfigError) as err:
        load_settings(path)
    assert "KBBOT_MODE" in str(err.value) and "'bogus'" in str(err.value) and "sparse, dense, hybrid" in str(err.value)
    r = run_cli(path, "search", "怎么添加知识", KBBOT_MODE="bogus")
    assert r.returncode == 2 and "KBBOT_MODE" in r.stderr
    monkeypatch.setenv("KBBOT_MODE", "dense")
    assert load_settings(path).mode == "dense"  # a valid value overrides the file


def test_a_mode_typo_in_config_yaml_is_rejected_at_load(tmp_path, raw):
    raw["retrieval"]["mode"] = "hybird"
    path = write(tmp_path, raw)
    with pytest.raises(ConfigError) as err:
        load_settings(path)
    assert "retrieval.mode" in str(err.value) and "'sparse', 'dense' or 'hybrid'" in str(err.value)
    r = run_cli(path, "index")
    assert r.returncode == 2 and "retrieval.mode" in r.stderr


def test_hybrid_needs_a_sparse_weight_for_the_configured_encoder(tmp_path, raw):
    raw["retrieval"]["mode"] = "hybrid"
    raw["retrieval"]["dense"]["encoder"] = "e5"
    raw["retrieval"]["hybrid"]["sparse_weight"] = {"fasttext": 0.5}
    with pytest.raises(ConfigError, match=r"retrieval\.hybrid\.sparse_weight has no value for the e5 encoder"):
        build_bot(load_settings(write(tmp_path, raw)))
    raw["retrieval"]["hybrid"]["sparse_weight"] = {"e5": 1.5}
    with pytest.raises(ConfigError, match=r"retrieval\.hybrid\.sparse_weight"):
        load_settings(write(tmp_path, raw))


def test_system_of_a_mode_follows_the_encoder(tmp_path, raw):
    raw["retrieval"]["dense"]["encoder"] = "fasttext"
    settings = load_settings(write(tmp_path, raw))
    assert [settings.retrieval.system(m) for m in ("sparse", "dense", "hybrid")] == [
        "sparse",
        "dense-fasttext",
        "hybrid-fasttext",
    ]


def test_cutoffs_describe_and_serialise():
    assert Cutoffs("hybrid-e5", 0.81).describe() == "hybrid-e5 ≥ 0.81"
    assert Cutoffs("sparse", 0.35, 0.9).describe() == "sparse ≥ 0.35 (direct ≥ 0.9)"
    assert Cutoffs("sparse", 0.35, 0.9).to_dict() == {
        "system": "sparse",
        "answer": 0.35,
        "direct": 0.9,
        "clarify": None,
        "confirm": None,
        "unsure": None,
        "stand_in": None,
        "settle": None,
        "settle_dense": None,
        "translated": 0.0,
        "contrast": False,
        "together": None,
    }


def test_the_cutoffs_of_a_threshold_block_keep_every_cutoff_in_its_place():
    block = CutoffSettings(
        answer=0.5,
        direct=0.9,
        clarify=0.01,
        settle=0.05,
        settle_dense=0.06,
        confirm=0.02,
        unsure=0.03,
        stand_in=0.04,
        contrast=True,
    )
    cutoffs = Cutoffs.from_settings("sparse", block)
    assert cutoffs == Cutoffs(
        "sparse",
        0.5,
        direct=0.9,
        clarify=0.01,
        confirm=0.02,
        unsure=0.03,
        stand_in=0.04,
        settle=0.05,
        settle_dense=0.06,
        contrast=True,
    )
    assert cutoffs.to_dict() == {"system": "sparse", **block.model_dump()}  # one field each, the same names
