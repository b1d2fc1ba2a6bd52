"""One torn-line rule: a torn last line is left out and repaired before an append; any other bad line is an
error naming the file and line."""

import pytest

from prime_cli.records.json_lines import JsonLinesAppender, JsonLinesError, read_json_lines
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
