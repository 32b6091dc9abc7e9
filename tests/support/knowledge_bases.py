"""Two knowledge bases that answer the same questions differently (admissions is the default, hr the other), and
the config file that serves both (the ``two_kbs`` fixture in tests/conftest.py writes it)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml

from tests.support.knowledge import config_dict, write_knowledge

QUESTIONS = ["图书馆开放时间", "食堂在哪里？", "校园网怎么连接？", "学费是多少？"]
ADMISSIONS = {
    "library": {"query": QUESTIONS[0], "document": "招生办：图书馆早上八点开放。"},
    "canteen": {"query": QUESTIONS[1], "document": "招生办：食堂在东区。"},
    "wifi": {"query": QUESTIONS[2], "document": "招生办：连接 SYSU-WiFi。"},
    "fee": {"query": QUESTIONS[3], "document": "招生办：学费每年五千元。"},
}
HR = {
    "library": {"query": QUESTIONS[0], "document": "人事处：图书馆早上九点开放。"},
    "canteen": {"query": QUESTIONS[1], "document": "人事处：食堂在西区。"},
    "wifi": {"query": QUESTIONS[2], "document": "人事处：连接 HR-WiFi。"},
    "fee": {"query": QUESTIONS[3], "document": "人事处：学费由学院代缴。"},
    "leave": {"query": "年假有几天？", "document": "人事处：年假每年十五天。"},
}
HR_ONLY = "年假有几天？"  # only hr knows it: what routing from the default sends there
NOBODY = "火星上有几个食堂分店呢"  # neither knows it
HR_ADMIN = ("hr-boss", "hr-secret-pass")  # KBBOT_ADMIN_USER_HR / KBBOT_ADMIN_PASSWORD_HR


def expected(kb: str, question: str) -> str:
    """The document knowledge base ``kb`` answers ``question`` with."""
    source = ADMISSIONS if kb == "default" else HR
    return next(e["document"] for e in source.values() if e["query"] == question)


def answered(text: str, kb: str, question: str) -> bool:
    """True when ``text`` holds knowledge base ``kb``'s answer to ``question`` and not the other one's."""
    other = "hr" if kb == "default" else "default"
    return expected(kb, question) in text and expected(other, question) not in text


def write_two_kbs(tmp_path: Path, jieba_cache: Path, hr: dict[str, Any] | None = None, **top: Any) -> Path:
    """A config file serving the admissions knowledge (top level) and hr (``knowledge_bases.hr``: its knowledge
    folder, a label, and ``hr`` overrides), in the sparse mode; ``top`` keys replace top-level blocks."""
    raw = config_dict(tmp_path, write_knowledge(tmp_path / "admissions", ADMISSIONS).parent)
    write_knowledge(tmp_path / "hr", HR)
    raw["knowledge_bases"] = {
        "hr": {"knowledge": {"path": str(tmp_path / "hr")}, "routing": {"label": "人事处 HR"}, **(hr or {})}
    }
    raw.update(top)
    for state in (tmp_path / "state", tmp_path / "state" / "kb" / "hr"):  # the jieba dictionary, built once
        shutil.copytree(jieba_cache, state / "jieba", dirs_exist_ok=True)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return path
