"""One torn-line rule: a torn last line is left out and repaired before an append; any other bad line is an
error naming the file and line."""

import logging

import pytest

from prime_cli.records.json_lines import (
    JsonLinesAppender,
    JsonLinesError,
    append_json_line,
    read_json_lines,
    repair_torn_tail,
)
from prime_cli.runs.json_lines import dumps
from prime_cli.runs.metadata import RunDirError


def test_a_torn_last_line_is_left_out(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1}\n\n{"a": 2}\n{"a": 3}')
    assert read_json_lines(path) == [{"a": 1}, {"a": 2}, {"a": 3}]  # whole, only its newline missing
    path.write_text('{"a": 1}\n{"a": ')
    assert read_json_lines(path) == [{"a": 1}]


def test_a_missing_file_is_empty(tmp_path):
    assert read_json_lines(tmp_path / "none.jsonl") == []


@pytest.mark.parametrize("text, number", [('{"a": 1}\n{"a": \n{"a": 2}\n', 2), ('{"a": 1}\n[1, 2]\n', 2),
                                          ('{"a": 1}\nnot json\n', 2), ("[1]", 1)])
def test_a_bad_line_elsewhere_names_the_file_and_line(tmp_path, text, number):
    path = tmp_path / "rows.jsonl"
    path.write_text(text)
    with pytest.raises(JsonLinesError, match=f"rows.jsonl:{number}: ") as caught:
        read_json_lines(path)
    assert isinstance(caught.value, RunDirError)


def test_an_append_repairs_a_torn_line_first(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1}\n{"a": ')
    appender = JsonLinesAppender(path)
    appender.append({"a": 2})
    appender.close()
    assert path.read_text() == '{"a": 1}\n{"a": 2}\n'
    path.write_text('{"a": 1}')
    appender = JsonLinesAppender(path)
    appender.append({"a": "\u2028"})
    appender.close()
    assert read_json_lines(path) == [{"a": 1}, {"a": "\u2028"}] and path.read_text().count("\n") == 2


def test_the_appender_writes_with_the_encoding_it_is_given_and_refuses_after_close(tmp_path):
    path = tmp_path / "rows.jsonl"
    with JsonLinesAppender(path, encode=lambda obj: f'{{"n": {obj}}}') as appender:
        appender.append(1)
        appender.append(2)
    assert path.read_text() == '{"n": 1}\n{"n": 2}\n'
    with pytest.raises(ValueError, match="closed"):
        appender.append(3)


def test_append_json_line_repairs_then_appends_one_line(tmp_path):
    path = tmp_path / "rows.jsonl"
    append_json_line(path, {"a": 1})  # a missing file is created
    with path.open("ab") as fh:
        fh.write(b'{"a": ')
    append_json_line(path, {"a": {1, 2}}, encode=lambda obj: dumps(obj, default=sorted))
    assert path.read_text() == '{"a": 1}\n{"a": [1, 2]}\n'


def test_a_torn_line_longer_than_a_block_is_cut_at_its_start_with_a_warning(tmp_path, caplog):
    path = tmp_path / "rows.jsonl"
    head = '{"a": 1}\n' + '{"a": "' + "x" * 200_000 + '"}\n'
    path.write_text(head + '{"a": "' + "y" * 150_000)  # the torn line spans three 64 KiB blocks
    with caplog.at_level(logging.WARNING, logger="prime_cli.records.json_lines"):
        repair_torn_tail(path)
    assert path.read_text() == head
    assert [r.getMessage() for r in caplog.records] == [f"{path}:3: dropping a torn last line (150007 bytes)"]
    repair_torn_tail(path)  # a file that ends at a line's end is left as it is
    assert path.read_text() == head


def test_a_file_that_is_only_a_torn_line_is_emptied(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'{"a": "\xc3')  # cut inside a UTF-8 character
    repair_torn_tail(path)
    assert path.read_bytes() == b""
