"""Every config key the starter knowledge, the README and docs/ name exists in the settings model, so the bot's own help
cannot drift from config.yaml again (it once told users to set keys the config rejects)."""

from __future__ import annotations

import collections.abc
import json
import re
import typing

import pytest
from pydantic import BaseModel, ValidationError

from bot.config.settings import SYSTEMS, Settings
from tests.support.knowledge import ROOT

pytestmark = pytest.mark.unit

TOP = "|".join(Settings.model_fields)
# A dotted name that starts with a top-level section: "retrieval.thresholds.hybrid-e5.answer", not "bot/log.py".
NAME = re.compile(rf"(?<![\w/.\-])(?:{TOP})\.[A-Za-z_][\w\-]*(?:\.[A-Za-z_][\w\-]*)*")
FILE_SUFFIX = re.compile(r"\.(py|json|jsonl|yaml|yml|md|txt|csv|xlsx|sqlite|png|bin)$")
# Names the knowledge shows on purpose as mistakes (how a typo is reported).
DELIBERATE_TYPOS = {"retrieval.sprase"}


def resolve(path: str) -> str | None:
    """None when ``path`` names a setting (a section, a key, or a key of a mapping), else why it does not."""
    model: typing.Any = Settings
    parts = path.split(".")
    if parts[0] == "knowledge_bases" and len(parts) > 2:  # knowledge_bases.<name>.<a setting of the whole config>
        return resolve(".".join(parts[2:]))
    i = 0
    while i < len(parts):
        part = parts[i]
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return f"{'.'.join(parts[:i])} is a value, it has no {part!r}"
        if part not in model.model_fields:
            return f"{'.'.join(parts[: i + 1])} is not a setting"
        annotation = model.model_fields[part].annotation
        i += 1
        if typing.get_origin(annotation) in (dict, collections.abc.Mapping):  # thresholds: a read-only Mapping
            key_type, value_type = typing.get_args(annotation)
            if i < len(parts):
                keys = typing.get_args(key_type) if typing.get_origin(key_type) is typing.Literal else None
                keys = SYSTEMS if part == "thresholds" else keys
                if keys is not None and parts[i] not in keys:
                    return f"{'.'.join(parts[: i + 1])}: {parts[i]!r} is not one of {', '.join(keys)}"
                i += 1
            model = value_type
        else:
            model = annotation
    return None


def named_keys(text: str) -> set[str]:
    """The dotted config names in a text (trailing sentence dots and file names left out)."""
    names = {m.rstrip(".") for m in NAME.findall(text)}
    return {n for n in names if "." in n and not FILE_SUFFIX.search(n)}


def documents() -> dict[str, str]:
    """README, docs/*.md and every string of the starter knowledge files, by where they come from."""
    texts = {"README.md": (ROOT / "README.md").read_text(encoding="utf-8")}
    texts.update({f"docs/{p.name}": p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").glob("*.md"))})
    for path in sorted((ROOT / "knowledge").glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        for key, entry in data.items() if isinstance(data, dict) else enumerate(data):
            texts[f"{path.name}:{key}"] = " ".join(str(v) for v in entry.values())
    return texts


def test_the_resolver_tells_settings_from_made_up_names():
    assert resolve("retrieval.mode") is None
    assert resolve("retrieval.thresholds.hybrid-e5.answer") is None
    assert resolve("retrieval.hybrid.sparse_weight.e5") is None
    assert resolve("retrieval.sparse.field_weights.query") is None
    assert "not a setting" in (resolve("retrieval.sparse.threshold") or "")
    assert "not one of" in (resolve("retrieval.thresholds.tantivy.answer") or "")
    assert "is a value" in (resolve("retrieval.mode.sparse") or "")
    assert resolve("knowledge_bases.hr.ui.admin.username_env") is None  # a knowledge base's entry is a whole config
    assert "not a setting" in (resolve("knowledge_bases.hr.ui.admin.user") or "")
    assert named_keys("set `retrieval.mode`. See bot/log.py and knowledge.json, or llm.api_key_env.") == {
        "retrieval.mode",
        "llm.api_key_env",
    }


def test_every_config_key_named_in_the_knowledge_and_readme_exists():
    texts = documents()
    found = {(where, name) for where, text in texts.items() for name in named_keys(text)}
    assert len(found) > 50  # the scan does find the names (the docs alone name dozens)
    wrong = sorted(
        f"{where}: {name}: {why}" for where, name in found if (why := resolve(name)) and name not in DELIBERATE_TYPOS
    )
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("name", sorted(DELIBERATE_TYPOS))
def test_the_typos_the_knowledge_shows_are_rejected_by_the_config(name):
    section, key = name.split(".")
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        Settings.model_validate({**_minimal(), section: {key: {}}})


def _minimal() -> dict:
    return {
        "prompt": {"persona": "p"},
        "fallback": {
            "hyde": {"template": "{question}"},
            "last_resort": {"reply": "r", "notice": "n"},
        },
    }
