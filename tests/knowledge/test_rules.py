"""The rules file: its format, the problems of bad rules with their file and line, how messages are normalised,
the time bound of regex rules, and the rules an earlier one shadows."""

from __future__ import annotations

import pytest

from bot.knowledge.rules import load_rules, parse_rules, rule_form, shadows

pytestmark = pytest.mark.unit

IDS = {"faq:phone", "faq:fees", "faq:leave"}
# A regex that backtracks forever on a long run of "a" before a "b" (kept by normalising): (a|aa)+ has Fibonacci-many
# ways to split the run, each tried before the "$" fails. The `regex` package does not optimise this one away.
CATASTROPHIC = "^(a|aa)+$"
SLOW_MESSAGE = "a" * 200 + "b"


def test_every_kind_loads_in_file_order_with_its_line(kb_dir):
    (kb_dir / "rules.yaml").write_text(
        "# pinned answers\n"
        "- exact: 校医院电话\n"
        "  entry: faq:phone\n"
        "- contains: [退学, 休学]\n"
        "  entry: faq:leave\n"
        "- regex: '^(学费|tuition)\\b'\n"
        "  entry: faq:fees\n",
        encoding="utf-8",
    )
    rules = load_rules(kb_dir, IDS)
    assert not rules.problems
    assert [(r.kind, r.pattern, r.entry_id, r.line) for r in rules.rules] == [
        ("exact", "校医院电话", "faq:phone", 2),
        ("contains", "退学", "faq:leave", 4),
        ("contains", "休学", "faq:leave", 4),
        ("regex", "^(学费|tuition)\\b", "faq:fees", 6),
    ]
    assert rules.rules[0].where == f"{kb_dir / 'rules.yaml'}:2"
    assert rules.match("  校医院电话？", 1.0).rule == rules.rules[0]
    assert rules.match("我想休学一年", 1.0).rule == rules.rules[2]
    assert rules.match("Tuition fees 2026", 1.0).rule == rules.rules[3]  # case-insensitive, anywhere after ^
    assert rules.match("校医院电话是多少", 1.0).rule is None  # exact means the whole message


def test_the_first_matching_rule_answers():
    rules = parse_rules("- contains: 学费\n  entry: faq:fees\n- exact: 学费电话\n  entry: faq:phone\n", "r.yaml", IDS)
    assert rules.match("学费电话", 1.0).rule == rules.rules[0]


def test_normalising_folds_width_case_spaces_and_end_punctuation():
    assert rule_form("  ＷｉＦｉ   密码？！ ") == "wifi 密码"
    assert rule_form("「校医院电话」。") == "校医院电话"
    assert rule_form("STRASSE") == rule_form("straße")  # case-folded, not just lowered
    assert rule_form("？！。 ") == ""
    assert rule_form("C++ 教程") == "c++ 教程"  # symbols and inner punctuation stay


def test_patterns_are_text_as_written_not_yaml_numbers_or_booleans():
    rules = parse_rules("- exact: 110\n  entry: faq:phone\n- exact: yes\n  entry: faq:fees\n", "r.yaml", IDS)
    assert [r.text for r in rules.rules] == ["110", "yes"]


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        ("- exact: 电话\n  entry: faq:gone\n", 1, "entry 'faq:gone', which the knowledge does not have"),
        ("- exact: 电话\n  entry: faq:phone\n- regex: '(学费'\n  entry: faq:fees\n", 3, "does not compile"),
        ("- exact: 电话\n  contains: 话\n  entry: faq:phone\n", 1, "exactly one of exact, contains, regex"),
        ("- exact: 电话\n", 1, "needs the id of the entry"),
        ("- exact: 电话\n  entry: faq:phone\n  answer: 12345\n", 3, "unknown key 'answer'"),
        ("- exact: 电话\n  entry: faq:phone\n  entry: faq:fees\n", 3, "'entry' appears twice"),
        ("- contains: '？？'\n  entry: faq:phone\n", 1, "empty once normalised"),
        ("- regex: ''\n  entry: faq:phone\n", 1, "would match every message"),
        ("- exact: {a: b}\n  entry: faq:phone\n", 1, "must be text or a list of texts"),
        ("- just a string\n", 1, "a rule must be a mapping"),
        ("- exact: [电话\n  entry: faq:phone\n", 2, "invalid YAML"),
    ],
)
def test_a_bad_rule_is_left_out_with_its_file_and_line_and_the_others_load(text, line, says):
    good = "- exact: 好的规则\n  entry: faq:leave\n"
    rules = parse_rules(good + text, "knowledge/rules.yaml", IDS)
    (problem,) = rules.problems
    assert problem.file == f"knowledge/rules.yaml:{line + 2}" and says in problem.problem
    assert str(problem).startswith(f"knowledge/rules.yaml:{line + 2}: ")
    if "invalid YAML" not in says:  # a file that is not YAML has no rules to keep
        assert rules.match("好的规则", 1.0).rule is not None


def test_a_file_that_is_not_a_list_or_nested_too_deeply_is_one_problem():
    (problem,) = parse_rules("exact: 电话\nentry: faq:phone\n", "r.yaml", IDS).problems
    assert problem.file == "r.yaml:1" and "must be a list of rules" in problem.problem
    (deep,) = parse_rules("[" * 100_000, "r.yaml", IDS).problems
    assert deep.file == "r.yaml" and deep.problem == "invalid YAML: nested too deeply"


def test_no_file_no_rules_and_an_unreadable_one_is_a_problem(kb_dir):
    assert load_rules(kb_dir, IDS).rules == ()
    (kb_dir / "rules.yaml").write_bytes(b"- exact: \xff\xfe\n")
    (problem,) = load_rules(kb_dir, IDS).problems
    assert "cannot read as UTF-8" in problem.problem and problem.file == str(kb_dir / "rules.yaml")


def test_a_regex_that_backtracks_forever_is_skipped_and_reported_and_later_rules_still_match():
    text = f"- regex: '{CATASTROPHIC}'\n  entry: faq:fees\n- contains: b\n  entry: faq:phone\n"
    rules = parse_rules(text, "r.yaml", IDS)
    found = rules.match(SLOW_MESSAGE, 0.05)
    assert found.rule is not None and found.rule.entry_id == "faq:phone"
    assert [r.pattern for r in found.timed_out] == [CATASTROPHIC]


def test_the_time_budget_is_shared_so_later_regexes_are_skipped_once_it_is_spent():
    text = "".join(f"- regex: '{CATASTROPHIC}'\n  entry: faq:fees\n" for _ in range(5))
    found = parse_rules(text, "r.yaml", IDS).match(SLOW_MESSAGE, 0.02)
    assert found.rule is None and len(found.timed_out) == 5  # each tried or skipped once: the turn goes on


def test_shadowed_and_redundant_rules_are_found_and_independent_ones_are_not():
    text = (
        "- contains: 电话\n  entry: faq:phone\n"  # 1
        "- exact: 校医院电话\n  entry: faq:fees\n"  # 3: inside the contains rule, another entry: shadowed
        "- contains: 医院电话号码\n  entry: faq:phone\n"  # 5: same entry: redundant
        "- regex: '^退学'\n  entry: faq:leave\n"  # 7
        "- exact: 退学手续\n  entry: faq:fees\n"  # 9: the regex matches it first
        "- exact: 办理休学\n  entry: faq:leave\n"  # 11: independent
        "- exact: 办理休学\n  entry: faq:fees\n"  # 13: the same exact text again
        "- regex: '电话'\n  entry: faq:fees\n"  # 15: a later regex is not compared
    )
    rules = parse_rules(text, "r.yaml", IDS)
    found = {s.rule.line: s.by.line for s in shadows(rules.rules)}
    assert found == {3: 1, 5: 1, 9: 7, 13: 11}
    said = {s.rule.line: s.describe() for s in shadows(rules.rules)}
    assert "is shadowed: those messages get faq:phone" in said[3] and said[3].startswith("r.yaml:3: ")
    assert "is redundant (same entry)" in said[5]


def test_the_linter_gives_up_on_a_regex_that_runs_out_of_time_rather_than_hang():
    text = f"- regex: '{CATASTROPHIC}'\n  entry: faq:fees\n- exact: '{SLOW_MESSAGE}'\n  entry: faq:phone\n"
    assert shadows(parse_rules(text, "r.yaml", IDS).rules) == []
