"""An eval that fails before any rollout finishes (an unreachable -b) prints the error line and the
retry counts (and, for a saved run, the resume command), not an empty summary (`Rollouts: 0 (0 examples
x 0)`, `Errors: 0.0%`, token lines)."""

from __future__ import annotations

import io
import json
import socket

from tests.cli.conftest import metadata, one_error_line, run_dirs
from tests.support.cli import run_prime

EMPTY_SUMMARY = ("Eval failed", "Rollouts:", "Reward:", "Errors:", "Tokens:", "Truncated:", "Timing:", "No results",
                 "Eval summary", "Results")


def unreachable_url() -> str:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens on it
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def eval_args(url: str, *extra: str) -> list[str]:
    return ["eval", "run", "reverse-text", "-m", "x", "-b", url, "-n", "1", "-r", "1", "--max-retries", "1", *extra]


def test_unreachable_server_prints_the_error_and_the_retries_only(tmp_path):
    url = unreachable_url()
    result = run_prime(eval_args(url), tmp_path)
    one_error_line(result, f"cannot reach {url}")
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith("Evaluating x on reverse-text"), result.stdout
    assert lines[1:] == ["Retries: 1 retry of 1 model call (connection: 1); 1 call still failed"], result.stdout


def test_a_saved_run_that_failed_early_is_kept_as_failed_and_says_how_to_resume(tmp_path):
    result = run_prime(eval_args(unreachable_url(), "-s"), tmp_path)
    one_error_line(result, "cannot reach")
    assert not any(word in result.stdout for word in EMPTY_SUMMARY), result.stdout
    [run_dir] = run_dirs(tmp_path)
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 3 and lines[1] == "Retries: 1 retry of 1 model call (connection: 1); 1 call still failed"
    assert lines[2].startswith("Resume with: prime eval run reverse-text -m x -b ") and lines[2].endswith(
        f"-R {run_dir.resolve()}"), lines
    meta = metadata(run_dir)
    assert meta["status"] == "failed" and meta["retries"]["retries"] == 1
    assert (run_dir / "results.jsonl").read_text() == ""


def test_json_events_still_end_with_done(tmp_path):
    result = run_prime(eval_args(unreachable_url(), "--json"), tmp_path)
    one_error_line(result, "cannot reach")
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert events[-1]["event"] == "done" and events[-1]["status"] == "failed"
    assert events[-1]["summary"]["num_rollouts"] == 0


def empty_summary() -> dict:
    from prime_cli.results.summary import summarize

    return {**summarize([]), "retries": {"calls_retried": 2, "retries": 6, "by_kind": {"connection": 6}, "gave_up": 2},
            "error_budget": {"max_error_rate": 0.1, "error_rate": 0.0, "errored_rollouts": 0, "rollouts": 0,
                             "exceeded": False}}


def test_the_live_panel_ends_the_same_way():
    from rich.console import Console

    from prime_cli.evals.display import RichDisplay

    out = io.StringIO()
    with RichDisplay(Console(file=out, width=120, force_terminal=False)) as display:
        display.start(env_id="reverse-text", model="x", run_dir=None, total=2, num_examples=2, rollouts_per_example=1)
        display.finish(status="failed", summary=empty_summary(), run_dir=None)
    text = out.getvalue()
    assert "Retries: 6 retries of 2 model calls (connection: 6); 2 calls still failed" in text, text
    assert not any(word in text for word in EMPTY_SUMMARY), text


def test_a_run_with_rollouts_still_gets_its_summary():
    from prime_cli.evals.display import PlainDisplay

    out = io.StringIO()
    summary = {**empty_summary(), "num_rollouts": 1, "num_examples": 1, "rollouts_per_example": 1, "avg_error": 1.0}
    PlainDisplay(out).finish(status="failed", summary=summary, run_dir=None)
    assert "Eval failed." in out.getvalue() and "Rollouts: 1 (1 examples x 1)" in out.getvalue()
