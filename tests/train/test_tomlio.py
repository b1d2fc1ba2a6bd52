"""The TOML writer of `prime train --dry-run` (prime_cli/train/tomlio.py): what it writes, tomllib reads back."""

from __future__ import annotations

import pytest

from prime_cli.train.tomlio import dumps, toml_loads


def test_keys_that_are_not_bare_ascii_are_quoted_and_read_back():
    data = {"café": 1, "a b": 2, "plain_key-1": 3, "env": {"naïve": "x", "ok": [1, 2]}}
    text = dumps(data)
    assert "plain_key-1 = 3" in text and "café = 1" not in text
    assert toml_loads(text) == data


def test_del_and_other_control_characters_in_strings_are_escaped():
    data = {"s": "a\x7fb\x00c\td\U0001f600", "t": {"k\x7f": ["x\x7f"]}}
    text = dumps(data)
    assert "\x7f" not in text and "\x00" not in text
    assert toml_loads(text) == data


def test_a_none_inside_a_list_is_refused_naming_the_key_not_dropped():
    with pytest.raises(ValueError, match=r"orchestrator\.stop: .*None"):
        dumps({"orchestrator": {"stop": ["a", None, "b"]}})
    with pytest.raises(ValueError, match=r"env\.args\.xs: .*None"):
        dumps({"env": [{"args": {"xs": [None]}}]})
    assert toml_loads(dumps({"a": None, "b": {"c": None, "d": 1}})) == {"b": {"d": 1}}  # unset keys stay unset
