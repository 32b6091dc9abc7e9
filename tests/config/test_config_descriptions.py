"""Every setting says what it does: the descriptions docs/configuration.md is generated from."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from bot.config.settings import Settings
from tests.support.config_keys import blocks

pytestmark = pytest.mark.unit


def test_every_setting_and_block_has_a_description() -> None:
    missing = []
    for prefix, model in blocks(Settings):
        if not (model.__doc__ or "").strip():
            missing.append(prefix or "Settings")
        for name, field in model.model_fields.items():
            if field.exclude:
                continue  # set by load_settings, not by the file
            block = isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)
            if not block and not (field.description or "").strip():
                missing.append(prefix + name)
    assert not missing, f"settings without a description (a docstring under the field): {missing}"


def test_descriptions_come_from_the_docstring_under_the_field() -> None:
    described = Settings.model_fields["retrieval"].annotation
    assert isinstance(described, type) and issubclass(described, BaseModel)
    assert "KBBOT_MODE" in (described.model_fields["mode"].description or "")
