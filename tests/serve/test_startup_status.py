"""While the embedded model's vLLM starts, output without a terminal (a pipe, CI) is not silent: a line
at least every PRIME_SERVE_WAIT_NOTICE_S seconds says the start is still going."""

from __future__ import annotations

import io

from rich.console import Console

from prime_cli.serve import startup_status


def ticks_printed(monkeypatch, elapsed: list[float], every: str | None) -> list[str]:
    out = io.StringIO()
    monkeypatch.setattr("rich.console.Console", lambda **kw: Console(file=out, force_terminal=False, **kw))
    if every is not None:
        monkeypatch.setenv(startup_status.WAIT_NOTICE_ENV, every)
    with startup_status.local_server_status() as (status, tick):
        status("starting vLLM")
        for seconds in elapsed:
            tick(seconds)
    return out.getvalue().splitlines()


def test_a_pipe_gets_a_line_every_30_s_while_vllm_starts(monkeypatch):
    lines = ticks_printed(monkeypatch, [0.5 * i for i in range(200)], None)  # 0 .. 99.5 s
    assert lines[0] == "local model: starting vLLM"
    assert lines[1:] == [f"local model: vLLM is still starting ({s} s so far)" for s in (30, 60, 90)]


def test_the_interval_can_be_shortened_and_bad_values_keep_the_default(monkeypatch):
    assert len(ticks_printed(monkeypatch, [0.5 * i for i in range(20)], "2")) == 1 + 4
    assert len(ticks_printed(monkeypatch, [0.5 * i for i in range(20)], "soon")) == 1
