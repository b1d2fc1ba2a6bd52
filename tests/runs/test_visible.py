"""`prime_cli.runs.visible`: control characters as visible escapes, once."""

import json

from prime_cli.runs.visible import json_visible, visible, visible_data
from tests.support.untrusted import EVIL, SHOWN


def test_every_control_character_becomes_an_escape_and_nothing_else_changes():
    assert visible(EVIL) == SHOWN
    assert visible("a\x00b\x7fc\x85d\x9fe") == "a\\x00b\\x7fc\\x85d\\x9fe"
    assert visible("line one\nline\ttwo") == "line one\\nline\\ttwo"
    text = "ünïcode → [bold]markup[/] \\x1b stays as typed, 表"
    assert visible(text) == text and visible(text, multiline=True) == text


def test_multiline_keeps_newlines_and_tabs_and_reads_crlf_as_a_newline():
    assert visible("a\r\nb\n\tc\rd", multiline=True) == "a\nb\n\tc\\rd"


def test_applying_it_twice_changes_nothing():
    for multiline in (False, True):
        once = visible(EVIL + "\n\t\r\n", multiline)
        assert visible(once, multiline) == once


def test_data_and_json():
    assert visible_data({f"k{EVIL}": [EVIL, 1, (None, EVIL)]}) == {f"k{SHOWN}": [SHOWN, 1, (None, SHOWN)]}
    dumped = json.dumps({"p": EVIL}, ensure_ascii=False)
    assert "\x9b" in dumped and "\x9b" not in json_visible(dumped)
    assert json.loads(json_visible(dumped)) == {"p": EVIL}  # the same JSON value
