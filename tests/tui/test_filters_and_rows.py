"""Filter expressions and the row logic (sorting keys, grouping, comparing, histograms)."""

import pytest

from prime_cli.tui.filters import FilterError, parse_filter
from prime_cli.tui.rows import compare, group_examples, histogram, sort_value
from tests.tui.fixtures import eval_row, rows_for

ROWS = rows_for(4, 2, errors={(3, 1)}, tools=True)


def matching(expression):
    flt = parse_filter(expression)
    return [(r["example_id"], r["rollout_idx"]) for r in ROWS if flt(r)]


def test_numeric_flag_metric_and_text_terms():
    assert matching("reward<0.5") == [(r["example_id"], r["rollout_idx"]) for r in ROWS if r["reward"] is not None and r["reward"] < 0.5]
    assert matching("error") == [(3, 1)] and len(matching("not error")) == 7 and len(matching("!error")) == 7
    assert matching("metrics.lcs_reward==1") == [(e, k) for e, k, r in ((r["example_id"], r["rollout_idx"], r) for r in ROWS) if r["reward"] == 1.0]
    assert matching("text~GAMMA") == [(1, 0), (1, 1)]  # case-insensitive
    assert matching("completion~reverse\\(") == [(0, 0), (0, 1)]  # tool calls are text too
    assert matching("example_id==2 or example_id==0 and rollout_idx=1") == [(0, 1), (2, 0), (2, 1)]
    assert matching("stop==error") == [(3, 1)]
    assert parse_filter("text~'a, b'").needs_text and not parse_filter("reward>0").needs_text
    assert parse_filter("  ") is None


@pytest.mark.parametrize("expression, message", [
    ("rewrd<1", "unknown field 'rewrd'"), ("reward<", "has no value"), ("reward<abc", "needs a number"),
    ("text~(", "bad regular expression"), ("reward 1", "cannot read"), ("error and ", "an empty term"),
])
def test_bad_expressions_name_the_problem(expression, message):
    with pytest.raises(FilterError, match=message.replace("(", r"\(")):
        parse_filter(expression)


def test_sort_values_put_numbers_first_and_missing_last():
    keys = sorted([sort_value(r, "reward") for r in ROWS])
    assert keys[-1] == (2, "") and all(k[0] == 0 for k in keys[:-1])


def test_group_compare_and_histogram():
    groups = group_examples(ROWS)
    assert [g.example_id for g in groups] == [0, 1, 2, 3] and groups[3].errors == 1
    a = [eval_row(0, 0, 1.0), eval_row(0, 1, 0.0), eval_row(1, 0, 1.0)]
    b = [eval_row(0, 0, 1.0), eval_row(2, 0, 0.5)]
    result = compare(a, b)
    assert [(p.example_id, p.delta) for p in result.pairs] == [(0, 0.5), (1, None), (2, None)]
    stats = result.stats()
    assert stats["joined"] == 1 and stats["only_a"] == 1 and stats["only_b"] == 1 and stats["better"] == 1
    assert histogram([0.0, 0.5, 1.0, 1.0], bins=2) == [(0.0, 0.5, 1), (0.5, 1.0, 3)]
    assert histogram([0.3, 0.3]) == [(0.3, 0.3, 2)] and histogram([]) == []
