"""Personal data is masked in everything the conversation log stores (read from the SQLite file itself), the LLM
sees what the user typed unless configured, refusal is optional, and retention runs on its own and from the CLI."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from openpyxl import load_workbook

from bot.chat.answer import Answer, Strategy
from bot.chat.recorder import row_of
from bot.config.settings import PrivacySettings, load_settings
from bot.config.variants import replace
from bot.conversations.privacy import PersonalData, PrivacyPolicy
from bot.conversations.turn_log import TurnLog, turn_log_from_settings
from bot.errors import ConfigError
from bot.evaluation.replay import replayer_from_settings
from bot.factory import build_bot, build_knowledge_base
from bot.ui.analytics_tab import AnalyticsHandlers
from bot.ui.inbox_tab import InboxHandlers
from bot.ui.records_tab import RecordHandlers
from tests.support.knowledge import ROOT, config_dict

pytestmark = pytest.mark.e2e

MOBILE, ID_CARD, EMAIL = "13812345678", "44010219900101123X", "zhang.san@example.com"
SECRETS = (MOBILE, "1234567", ID_CARD, "440102199001011", "zhang.san", "6222021234567890123")

FOUND = [
    ("我的手机号是13812345678，收不到验证码", "我的手机号是[mobile]，收不到验证码"),
    ("打 138-1234-5678 或 +86 139 1234 5678", "打 [mobile] 或 [mobile]"),
    ("身份证440102199001011234查询", "身份证[id_card]查询"),
    ("身份证号 44010219900101123x 丢了", "身份证号 [id_card] 丢了"),
    ("老身份证 440102900101123", "老身份证 [id_card]"),
    ("发到 zhang.san@mail.sysu.edu.cn 吧", "发到 [email] 吧"),
    ("卡号 6222 0212 3456 7890 123 被冻结", "卡号 [bank_card] 被冻结"),
    ("visa 4111-1111-1111-1111", "visa [bank_card]"),
    ("座机020-84112233转123", "座机[landline]"),
    ("电话 (020)84111111", "电话 [landline]"),
]
KEPT = [
    "中山大学1924年创办，2024年是百年校庆",
    "学号 20231234 怎么查成绩？",
    "订单号 2024061512345678",  # 16 digits, fails the Luhn check, not a UnionPay prefix
    "房间号 12345678901",  # 11 digits but no mobile prefix
    "图书馆8:00-22:00开放，电话400-820-8820",  # a company's 400 number is not personal
    "价格 1,299.00 元",
]


@pytest.mark.parametrize("text, masked", FOUND)
def test_each_kind_of_personal_data_is_masked(text, masked):
    assert PersonalData().mask(text) == masked


@pytest.mark.parametrize("text", KEPT)
def test_numbers_that_are_not_personal_data_stay(text):
    assert PersonalData().mask(text) == text


def test_configured_patterns_and_kinds():
    data = PersonalData(kinds=["email"], patterns={"student_id": r"(?<!\d)2023\d{4}(?!\d)"})
    assert data.mask("学号20231234，电话13812345678，a@b.cn") == "学号[student_id]，电话13812345678，[email]"


@pytest.mark.parametrize(
    "patterns, complaint",
    [({"bad": "(unclosed"}, "not a valid regular expression"), ({"empty": "x*"}, "empty"), ({"Bad Name": "x"}, "name")],
)
def test_a_bad_pattern_in_the_config_is_a_clear_error(tmp_path, patterns, complaint):
    raw = config_dict(tmp_path, tmp_path / "kb")
    raw["privacy"] = {"patterns": patterns}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    with pytest.raises(ConfigError, match=complaint):
        load_settings(tmp_path / "c.yaml")


def _stored_bytes(path: Path) -> bytes:
    """Everything the log keeps on disk: the database and its WAL."""
    return b"".join(Path(f"{path}{s}").read_bytes() for s in ("", "-wal") if Path(f"{path}{s}").exists())


def _log_path(settings) -> Path:
    return settings.resolve(settings.state_dir) / settings.log.path


def test_no_personal_data_reaches_the_sqlite_file_the_inbox_or_the_log_page(settings):
    bot = build_bot(settings)
    kb = build_knowledge_base(settings, bot)
    asked = [
        f"我的手机号{MOBILE}收不到验证码怎么办",  # misses: goes to the inbox
        f"身份证{ID_CARD}丢了怎么补办",
        f"图书馆开放时间？我电话 {MOBILE[:3]} {MOBILE[3:7]} {MOBILE[7:]}",  # answered
    ]
    turns = [kb.ask(q, session="s1", source="web") for q in asked]
    assert kb.recorder.feedback(turns[2].turn_id, -1, f"答非所问，回我邮件 {EMAIL} 或 卡 6222021234567890123")
    path = _log_path(settings)
    turn_log = kb.recorder.log
    assert turn_log is not None
    stored = _stored_bytes(path)
    for secret in SECRETS:
        assert secret.encode() not in stored, secret
    assert b"[mobile]" in stored and b"[id_card]" in stored and b"[email]" in stored
    page = InboxHandlers(kb.recorder.log, None).turns("", "", "")  # type: ignore[arg-type]
    groups = [" ".join((g.key, *g.questions, *g.reasons)) for g in turn_log.unanswered()]
    for secret in SECRETS:
        assert secret not in page and all(secret not in g for g in groups)
    assert "[mobile]" in page and any("[id_card]" in g for g in groups) and any("[email]" in g for g in groups)
    turn_log.close()  # checkpointed into the main file: still nothing
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for secret in SECRETS:
        assert secret.encode() not in _stored_bytes(path)


TYPED = {  # one mobile number as people type it; none of them may be stored in any form
    "full-width": "１３８１２３４５６７８",
    "arabic-indic": "١٣٨١٢٣٤٥٦٧٨",
    "dotted": "138.1234.5678",
    "spaced": "1 3 8 1 2 3 4 5 6 7 8",
}


def test_typed_forms_of_a_number_are_masked_in_all_that_is_stored(llm_settings, llm_server):
    from bot.conversations.analytics import analytics_from_settings

    llm_server.reply = lambda body: f"您说的号码是 {TYPED['full-width']}，邮箱 zhang＠example.com。"  # HyDE and answers
    bot = build_bot(llm_settings)
    kb = build_knowledge_base(llm_settings, bot)
    for form in TYPED.values():
        kb.ask(f"我的手机号{form}收不到火星的验证码", session="s1", source="web")
    turn_log = kb.recorder.log
    assert turn_log is not None
    assert kb.recorder.feedback(turn_log.recent(1)[0]["id"], -1, f"回我 {TYPED['arabic-indic']}")
    rows = turn_log.recent(10)
    stats = analytics_from_settings(turn_log, llm_settings).compute()
    shown = [
        _stored_bytes(_log_path(llm_settings)).decode("utf-8", "replace"),
        InboxHandlers(turn_log, None).turns("", "", ""),  # type: ignore[arg-type]
        str([(g.key, g.questions, g.reasons) for g in turn_log.unanswered()]),
        *(tile.csv() for tile in stats.tiles),
    ]
    for text in shown:
        for form in [*TYPED.values(), MOBILE, "zhang＠example", "zhang@example"]:
            assert form not in text, (form, text[:300])
    assert all("[mobile]" in r["question"] and r["norm"] and "138" not in r["norm"] for r in rows)
    assert {r["hypothetical"] for r in rows} == {"您说的号码是 [mobile]，邮箱 [email]。"}
    assert any("[mobile]" in tile.csv() for tile in stats.tiles)


def test_the_llm_sees_what_the_user_typed_unless_configured(llm_settings, llm_server):
    question = f"图书馆开放时间？我的手机号{MOBILE}"
    build_bot(llm_settings).answer(question)
    assert MOBILE in str(llm_server.requests[-1]["body"]["messages"])
    llm_settings = replace(llm_settings, "privacy.mask_llm", True)
    build_bot(llm_settings).answer(question)
    sent = str(llm_server.requests[-1]["body"]["messages"])
    assert MOBILE not in sent and "[mobile]" in sent


def test_refusal_answers_politely_sends_nothing_and_stays_out_of_the_inbox(llm_settings, llm_server):
    llm_settings = replace(llm_settings, "privacy.refuse", True)
    bot = build_bot(llm_settings)
    kb = build_knowledge_base(llm_settings, bot)
    answer = kb.ask(f"帮我查一下身份证 {ID_CARD} 的成绩", session="s", source="api")
    assert answer.strategy == Strategy.REFUSED
    assert answer.text.startswith("为了保护您的隐私") and "To protect your privacy" in answer.text
    assert llm_server.requests == [] and answer.hits == []
    assert kb.recorder.log is not None and kb.recorder.log.unanswered() == []
    stored = kb.recorder.log.recent(1)[0]
    assert ID_CARD not in stored["question"] and "[id_card]" in stored["question"]
    assert bot.answer("图书馆开放时间").strategy != Strategy.REFUSED  # no personal data: answered as usual


def test_masking_off_stores_text_as_typed_and_the_page_says_so(settings):
    settings = replace(settings, "privacy.mask", False)
    bot = build_bot(settings)
    kb = build_knowledge_base(settings, bot)
    kb.ask(f"手机号{MOBILE}", session="s", source="web")
    assert kb.recorder.log is not None
    assert kb.recorder.log.recent(1)[0]["question"] == f"手机号{MOBILE}"
    assert "NOT masked" in InboxHandlers(kb.recorder.log, None).turns("", "", "")  # type: ignore[arg-type]


def _cli(config: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bot", "--config", str(config), "log", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def _config(tmp_path: Path, **privacy) -> Path:
    raw = config_dict(tmp_path, tmp_path / "kb")
    raw["privacy"] = privacy
    raw["log"]["retention_days"] = 30
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return path


def _turn(question: str) -> Answer:
    return Answer(question=question, text="答", strategy=Strategy.LAST_RESORT, mode="sparse")


def test_log_purge_and_log_mask_from_the_command_line(tmp_path):
    config = _config(tmp_path, mask=False)
    settings = load_settings(config)
    raw = turn_log_from_settings(settings)
    assert raw is not None
    old = datetime.now(UTC) - timedelta(days=40)
    for n in range(3):
        raw.record(row_of(_turn(f"旧问题{n} {MOBILE}")), "s", now=old)
    raw.record(row_of(_turn(f"新问题 {MOBILE}")), "s")
    raw.close()

    done = _cli(config, "purge")
    assert done.returncode == 0, done.stderr
    assert "removed 3 turns; kept 1" in done.stdout
    refused = _cli(config, "mask")  # masking is off in this config: nothing to mask with
    assert refused.returncode == 2 and "privacy.mask is false" in refused.stderr

    config = _config(tmp_path, mask=True)
    done = _cli(config, "mask")
    assert done.returncode == 0 and "masked personal data in 1 turns" in done.stdout
    masked = turn_log_from_settings(load_settings(config))
    assert masked is not None
    assert [t["question"] for t in masked.recent()] == ["新问题 [mobile]"]
    purge = masked.last_purge()
    assert purge is not None and purge.removed == 0  # opening the log ran retention again: nothing left to remove
    masked.close()


def test_retention_runs_on_its_own_and_the_page_reports_it(tmp_path):
    clock = [datetime.now(UTC) - timedelta(days=10)]
    turn_log = TurnLog(tmp_path / "log.sqlite", retention_days=5, retention_rows=0, clock=lambda: clock[0])
    turn_log.record(row_of(_turn("很久以前的问题")), "s")
    clock[0] = datetime.now(UTC)
    from bot.chat.recorder import TurnRecorder

    recorder = TurnRecorder(turn_log)
    recorder.purge_every(0.05)
    try:
        deadline = time.monotonic() + 10
        while turn_log.count() and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        recorder.stop()
    assert turn_log.count() == 0
    purge = turn_log.last_purge()
    assert purge is not None and purge.removed == 1
    from bot.ui.inbox_tab import retention_html

    line = retention_html(turn_log)
    assert "5 天 / days" in line and "removed 1" in line and purge.time[:10] in line


def test_policy_from_settings_masks_for_search_only_when_asked():
    policy = PrivacyPolicy.from_settings(PrivacySettings())
    assert policy.for_search(f"电话{MOBILE}") == f"电话{MOBILE}" and not policy.refused(f"电话{MOBILE}")
    policy = PrivacyPolicy.from_settings(PrivacySettings(mask_llm=True, refuse=True))
    assert policy.for_search(f"电话{MOBILE}") == "电话[mobile]" and policy.refused(f"电话{MOBILE}")


def test_outcomes_entry_records_replays_and_their_exports_stay_masked(settings, tmp_path):
    kb = build_knowledge_base(settings)
    asked = [f"食堂在哪里？我手机{MOBILE}", f"食堂在哪里？邮箱 {EMAIL}", f"身份证{ID_CARD}丢了怎么补办"]
    turns = [kb.ask(q, session=q, source="web") for q in asked]
    assert kb.recorder.feedback(turns[0].turn_id, -1, f"答案错误 / Wrong answer: 打 {MOBILE}")
    assert kb.recorder.solved(turns[1].turn_id, False)
    analytics = AnalyticsHandlers(kb.log, kb.index, top=10, sample=1000, export_dir=tmp_path)
    shown = str(analytics.show("", "", "", ""))  # the page: outcomes, failing entries, reasons, every table
    exported = [Path(p).read_text(encoding="utf-8-sig") for p in analytics.export("", "", "", "") or []]
    records = RecordHandlers(kb.log, kb.index, kb.store, export_dir=tmp_path)
    table = records.show("", "", "failures")[1].to_csv()
    files = records.export("", "", "failures")["value"]
    workbook = load_workbook(next(p for p in files if p.endswith(".xlsx")))
    cells = " ".join(str(c.value) for row in workbook.active.iter_rows() for c in row)
    deleting = lambda scratch: [scratch.delete_entry("faq.json", "canteen")]
    replayer = replayer_from_settings(kb.search, kb.store, kb.recorder, settings)
    replay = replayer.replay_edit(deleting)
    lost = json.dumps([replay.to_dict(), [q.text for q in replayer.questions()[0]]], ensure_ascii=False)
    assert "faq:canteen" in shown and "not_solved" in shown and "faq:canteen" in table and len(exported) > 5
    assert "[mobile]" in lost and "[email]" in lost  # the replay asks the questions as the log keeps them
    for text in (shown, *exported, table, Path(files[0]).read_text(encoding="utf-8-sig"), cells, lost):
        for secret in SECRETS:
            assert secret not in text, secret
