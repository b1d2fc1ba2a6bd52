"""The eval's retry lines on the terminal: each timeout, the first few other retries, none for a server that
cannot be reached (its one error line ends the run)."""

from __future__ import annotations

import io

from prime_cli.evals.endpoints import RetryWarnings


def test_every_timeout_and_the_first_five_other_retries_get_a_line():
    out = io.StringIO()
    warn = RetryWarnings(300, stream=out)
    for attempt in range(1, 8):
        warn("m at http://h/v1", "HTTP 429", attempt % 3 + 1, 3)
    warn("m at http://h/v1", "timeout", 1, 3)
    warn("m at http://h/v1", "connection refused", 1, 3)
    lines = out.getvalue().splitlines()
    assert len(lines) == 6 and all(line.startswith("warning: ") for line in lines)
    assert "not shown" in lines[4] and "HTTP 429" in lines[4]
    assert "no reply within 300s (--timeout)" in lines[5] and "from scratch" in lines[5]


def test_a_retry_line_shows_control_characters_as_escapes():
    out = io.StringIO()
    RetryWarnings(1, stream=out)("m\x1b[2J at http://h/v1", "HTTP 500", 1, 3)
    assert "\x1b" not in out.getvalue() and "\\x1b" in out.getvalue()
