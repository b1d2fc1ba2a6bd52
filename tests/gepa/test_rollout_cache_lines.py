"""The rollout cache reads rollouts.jsonl by the one torn-line rule: a line cut by a kill is run again (and
cut away, so the next entry starts its own line); a bad line in the middle is an error naming file:line."""

import pytest

from prime_cli.gepa.evaluator import RolloutCache
from prime_cli.records.json_lines import JsonLinesError, read_json_lines


def test_a_torn_last_line_is_run_again_and_the_next_entry_starts_its_own_line(tmp_path):
    path = tmp_path / "rollouts.jsonl"
    path.write_text('{"key": "a", "reward": 1.0}\n{"key": "b", "rew')
    cache = RolloutCache(path)
    assert "a" in cache and "b" not in cache
    cache.put({"key": "b", "reward": 0.0})
    cache.close()
    assert [e["key"] for e in read_json_lines(path)] == ["a", "b"]


def test_a_corrupt_middle_line_is_an_error_naming_the_file_and_line(tmp_path):
    path = tmp_path / "rollouts.jsonl"
    path.write_text('{"key": "a"}\n{"key": "b", "rew\n{"key": "c"}\n')
    with pytest.raises(JsonLinesError, match="rollouts.jsonl:2: "):
        RolloutCache(path)
