"""The shipped config.yaml is short: it sets only what differs from the defaults, plus a few keys every deployer
changes; keys it leaves out can still be written (calibrate --write) and watched."""

from __future__ import annotations

import os

import pytest
import yaml

from bot.config.settings import Settings, load_settings
from bot.config.watch import ConfiguredMode
from bot.config.yaml_edit import YamlEditError, put_scalar
from tests.support.config_keys import set_keys
from tests.support.knowledge import ROOT

pytestmark = pytest.mark.unit

# Shown although they equal the default, because a deployer changes them first and should not have to look them up:
# where the knowledge is, the retrieval mode, the LLM endpoint and model and where its key comes from, and where the
# app listens. Keep this list short: every other key is in docs/configuration.md.
SHOWN_FOR_DISCOVERY = {
    "knowledge.path",
    "retrieval.mode",
    "llm.base_url",
    "llm.model",
    "llm.api_key_env",
    "ui.host",
    "ui.port",
}


def shipped_keys():
    return set_keys(yaml.safe_load((ROOT / "config.yaml").read_text(encoding="utf-8")))


def test_config_yaml_sets_only_keys_that_differ_from_their_default(monkeypatch):
    monkeypatch.delenv("KBBOT_MODE", raising=False)
    same = {k.path for k in shipped_keys() if k.is_default} - SHOWN_FOR_DISCOVERY
    assert not same, f"config.yaml repeats defaults (drop them; docs/configuration.md lists every default): {same}"


def test_every_key_shown_for_discovery_is_in_config_yaml():
    assert not SHOWN_FOR_DISCOVERY - {k.path for k in shipped_keys()}


def test_the_key_check_sees_a_repeated_default():
    raw = yaml.safe_load((ROOT / "config.yaml").read_text(encoding="utf-8"))
    raw["limits"] = {"max_message_chars": 2000, "max_upload_mb": 9}
    found = {k.path: k.is_default for k in set_keys(raw)}
    assert found["limits.max_message_chars"] and not found["limits.max_upload_mb"]
    assert not found["prompt.persona"]  # required: no default to repeat


def test_the_cutoffs_a_file_names_replace_only_those_shipped():
    shipped = Settings.model_fields["retrieval"].default_factory().thresholds  # type: ignore[misc,call-arg]
    s = load_settings(ROOT / "config.yaml")
    assert s.retrieval.thresholds == shipped and s.retrieval.thresholds["hybrid-e5"].answer == 0.83
    raw = yaml.safe_load((ROOT / "config.yaml").read_text(encoding="utf-8"))
    raw["retrieval"]["thresholds"] = {"sparse": {"answer": 0.3}, "hybrid-e5": {"answer": 0.9}}
    mine = Settings.model_validate(raw).retrieval.thresholds
    assert mine["sparse"].answer == 0.3 and mine["dense-e5"].answer == 0.87  # not named: shipped
    assert (mine["hybrid-e5"].answer, mine["hybrid-e5"].clarify) == (0.9, 0.005)  # calibrate --write changes answer
    raw["retrieval"]["thresholds"] = {"hybrid-e5": {"clarify": None}}
    assert Settings.model_validate(raw).retrieval.thresholds["hybrid-e5"].clarify is None  # null still turns it off


def test_put_scalar_adds_a_key_config_yaml_leaves_out_and_keeps_every_line(tmp_path):
    text = (ROOT / "config.yaml").read_text(encoding="utf-8")
    out = put_scalar(text, ("retrieval", "thresholds", "hybrid-e5", "answer"), 0.8)
    out = put_scalar(out, ("retrieval", "thresholds", "hybrid-e5", "clarify"), None)
    out = put_scalar(out, ("limits", "max_upload_mb"), 2.5)
    remaining = iter(out.splitlines())
    assert all(line in remaining for line in text.splitlines())
    (tmp_path / "config.yaml").write_text(out, encoding="utf-8")
    s = load_settings(tmp_path / "config.yaml")
    assert (s.retrieval.thresholds["hybrid-e5"].answer, s.retrieval.thresholds["hybrid-e5"].clarify) == (0.8, None)
    assert s.limits.max_upload_mb == 2.5 and s.retrieval.mode == "hybrid" and s.prompt.persona


def test_put_scalar_replaces_a_present_key_in_place():
    text = "retrieval:\n  mode: hybrid  # why\n"
    assert put_scalar(text, ("retrieval", "mode"), "sparse") == 'retrieval:\n  mode: "sparse"  # why\n'
    assert put_scalar("a: 1", ("b", "c"), 2) == "a: 1\nb:\n  c: 2\n"


@pytest.mark.parametrize(
    "text, path",
    [
        ("retrieval:\n  thresholds: {}\n", ("retrieval", "thresholds", "sparse", "answer")),  # a flow mapping
        ("llm:\n  model: x\n", ("llm", "model", "name")),  # a scalar, not a mapping
        ("a:\n  b: 1\na:\n  c: 2\n", ("a", "d")),  # the parent twice
    ],
)
def test_put_scalar_refuses_to_add_under_anything_but_one_block_mapping(text, path):
    with pytest.raises(YamlEditError, match="cannot be added; file not changed"):
        put_scalar(text, path, 1)


def test_the_mode_watcher_reads_the_default_when_the_file_leaves_the_mode_out(tmp_path, monkeypatch):
    monkeypatch.delenv("KBBOT_MODE", raising=False)
    shipped = (ROOT / "config.yaml").read_text(encoding="utf-8")
    start = shipped.index("retrieval:\n")
    text = shipped[:start] + shipped[shipped.index("\n\n", start) + 2 :]  # no retrieval block at all
    assert "mode:" not in text.split("prompt:")[0]
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    watched = ConfiguredMode(path, "sparse", check_interval=0)
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000))
    assert watched() == "hybrid" and watched.error is None  # the default, as a restart would read it
    path.write_text(put_scalar(text, ("retrieval", "mode"), "dense"), encoding="utf-8")
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 2_000_000))
    assert watched() == "dense"
