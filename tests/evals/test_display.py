"""Eval displays: NDJSON events, plain lines, the rich live panel and the summary renderer."""

import io
import json
import re
import sys

import pytest
from rich.console import Console

from prime_cli.evals.display import (
    EvalDisplay,
    JsonDisplay,
    PlainDisplay,
    RichDisplay,
    make_display,
    render_summary,
    summary_text,
)

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
START = dict(env_id="gsm8k", model="gpt-x", run_dir="runs/abc", total=10, num_examples=5,
             rollouts_per_example=2)
RESUME = "prime eval run gsm8k -m gpt-x -n 5 -r 2 -R runs/abc"
FULL = {
    "num_rollouts": 80, "num_examples": 20, "rollouts_per_example": 4,
    "avg_reward": 0.512, "std_reward": 0.231,
    "avg_metrics": {"exact_match": 0.5, "format_ok": 0.9},
    "std_metrics": {"exact_match": 0.1, "format_ok": 0.05},
    "pass_at_k": {"1": 0.5, "2": 0.625, "4": 0.75},
    "stop_conditions": {"completed": 77, "max_turns": 3},
    "avg_error": 0.025, "error_kinds": {"TimeoutError": 2},
    "metrics_errors": {"score_fn": 3},
    "timing": {"avg_generation_ms": 1200.0, "avg_scoring_ms": 5.0, "avg_total_ms": 1210.0,
               "p50_total_ms": 1100.0, "p95_total_ms": 2400.0},
    "usage": {"prompt_tokens": 12345, "completion_tokens": 6789, "avg_prompt_tokens": 154.3,
              "avg_completion_tokens": 84.9},
    "is_truncated": 0.0125,
    "per_task": {"algebra": {"num_rollouts": 40, "avg_reward": 0.7, "std_reward": 0.2,
                             "avg_error": 0.0, "pass_at_k": {"1": 0.7},
                             "avg_metrics": {"exact_match": 0.65}},
                 "geometry": {"num_rollouts": 40, "avg_reward": 0.324, "avg_error": 0.05}},
}


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class TtyStringIO(io.StringIO):
    def isatty(self) -> bool:
        return True


def stats(done, reward=0.5, errors=0, **extra):
    return {"done": done, "avg_reward": reward, "avg_metrics": {"exact_match": 0.25},
            "errors": errors, "metrics_errors": 0, **extra}


def strict_json(line: str) -> dict:
    def reject(const):
        raise ValueError(f"non-standard JSON constant {const}")
    return json.loads(line, parse_constant=reject)


# --- JSON -------------------------------------------------------------------------------------

def test_json_events_are_ndjson_in_order_with_fields():
    out, clock = io.StringIO(), FakeClock()
    with JsonDisplay(out, clock=clock) as d:
        d.start(**START)
        for done in range(1, 11):
            clock.t += 1.0
            d.progress(done=done, total=10, stats=stats(done, reward=float("nan") if done == 1 else 0.5))
        d.message("retrying after HTTP 429", level="warning")
        d.finish(status="completed", summary=FULL, run_dir="runs/abc", resume_command=None)
    events = [strict_json(line) for line in out.getvalue().splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds == ["start"] + ["progress"] * 10 + ["message", "done"]
    assert events[0] == {"event": "start", **START, "already_done": 0}
    assert {e["env_id"] for e in events} == {"gsm8k"}  # runs sharing a stream stay apart
    first, last = events[1], events[10]
    assert first["avg_reward"] is None  # NaN became null, so the line stays valid JSON
    assert last["done"] == 10 and last["total"] == 10 and last["errors"] == 0
    assert last["rate"] == pytest.approx(1.0) and last["eta_s"] == 0.0
    assert events[5]["eta_s"] == pytest.approx(5.0)  # 5 done at 1/s, 5 left
    assert events[-2] == {"event": "message", "env_id": "gsm8k", "level": "warning",
                          "text": "retrying after HTTP 429"}
    done = events[-1]
    assert done["status"] == "completed" and done["run_dir"] == "runs/abc"
    assert done["summary"]["pass_at_k"]["2"] == 0.625 and done["resume_command"] is None


def test_json_progress_is_throttled_but_keeps_the_final_update():
    out, clock = io.StringIO(), FakeClock()
    d = JsonDisplay(out, clock=clock)
    d.start(**{**START, "total": 100})
    for done in range(1, 101):
        clock.t += 0.01  # 100 rollouts/s: far faster than the ~5 events/s allowed
        d.progress(done=done, total=100, stats=stats(done))
    progress = [strict_json(x) for x in out.getvalue().splitlines() if '"progress"' in x]
    assert 3 <= len(progress) <= 7
    assert progress[-1]["done"] == 100 and progress[-1]["rate"] == pytest.approx(100.0)


def test_json_finish_flushes_a_suppressed_last_progress_before_done():
    out, clock = io.StringIO(), FakeClock()
    d = JsonDisplay(out, clock=clock)
    d.start(**{**START, "already_done": 4})
    for done in range(5, 8):
        d.progress(done=done, total=10, stats=stats(done))  # same instant: only the first goes out
    d.message("cancelling: waiting for 3 in-flight rollouts")
    d.finish(status="cancelled", summary={}, run_dir="runs/abc", resume_command=RESUME)
    events = [strict_json(x) for x in out.getvalue().splitlines()]
    assert [e["event"] for e in events] == ["start", "progress", "message", "progress", "done"]
    assert events[0]["already_done"] == 4
    assert [events[1]["done"], events[3]["done"]] == [5, 7]
    assert events[-1]["status"] == "cancelled" and events[-1]["resume_command"] == RESUME


# --- plain ------------------------------------------------------------------------------------

def test_plain_output_has_no_ansi_and_carries_summary_and_resume_command():
    out, clock = io.StringIO(), FakeClock()
    with PlainDisplay(out, clock=clock) as d:
        d.start(**{**START, "already_done": 2})
        for done in range(3, 11):
            clock.t += 0.5
            d.progress(done=done, total=10, stats=stats(done, errors=1))
        d.message("retrying after HTTP 429", level="warning")
        d.finish(status="cancelled", summary=FULL, run_dir="runs/abc", resume_command=RESUME)
    text = out.getvalue()
    assert "\x1b" not in text
    assert "Evaluating gpt-x on gsm8k" in text and "resuming with 2 done" in text
    assert "gsm8k [10/10 100.0%] 2.00 rollouts/s" in text  # rate counts only the 8 new rollouts in 4 s
    assert "gsm8k [warning] retrying after HTTP 429" in text and "Eval cancelled." in text
    for needle in ("0.512 ± 0.231", "pass@1=0.500", "pass@4=0.750", "exact_match", "2.5%",
                   "TimeoutError: 2", "score_fn: 3", "algebra", "geometry", "12,345"):
        assert needle in text, needle
    assert text.rstrip().splitlines()[-1] == f"Resume with: {RESUME}"


def test_plain_progress_is_throttled_by_time_and_fraction():
    out, clock = io.StringIO(), FakeClock()
    d = PlainDisplay(out, clock=clock)
    d.start(**{**START, "total": 1000})
    for done in range(1, 1001):
        clock.t += 0.001  # 1 s in all: only the 10% steps (and the first and last) print
        d.progress(done=done, total=1000, stats=stats(done))
    lines = [x for x in out.getvalue().splitlines() if x.startswith("gsm8k [")]
    assert 10 <= len(lines) <= 12
    assert lines[-1].startswith("gsm8k [1000/1000 100.0%]")

    out, clock = io.StringIO(), FakeClock()
    d = PlainDisplay(out, clock=clock)
    d.start(**{**START, "total": 1000})
    for done in range(1, 6):
        clock.t += 3.0  # slow run: one line per update, since 2 s passed each time
        d.progress(done=done, total=1000, stats=stats(done))
    assert sum(x.startswith("gsm8k [") for x in out.getvalue().splitlines()) == 5


# --- rich -------------------------------------------------------------------------------------

def rich_console() -> Console:
    return Console(file=io.StringIO(), force_terminal=True, width=100)


def test_rich_panel_shows_progress_reward_and_errors():
    console, clock = rich_console(), FakeClock()
    with RichDisplay(console, clock=clock) as d:
        d.start(**START)
        clock.t += 4.0
        d.progress(done=8, total=10, stats=stats(8, reward=0.75, errors=2))
        d.message("retrying after HTTP 429 [attempt 2]", level="warning")
    raw = console.file.getvalue()
    text = ANSI.sub("", raw)
    assert "8/10" in text and "2.00 rollouts/s" in text and "ETA 0:01" in text
    assert "avg reward 0.750" in text and "errors 2" in text and "exact_match" in text
    assert "retrying after HTTP 429 [attempt 2]" in text  # not swallowed as markup
    assert "gsm8k · gpt-x" in text
    assert re.search(r"\x1b\[[0-9;]*31m2", raw)  # the error count is red


@pytest.mark.parametrize("terminal", [True, False])
def test_rich_finish_prints_summary_and_unwrapped_resume_command(terminal):
    console = Console(file=io.StringIO(), force_terminal=terminal, width=100)
    long_resume = RESUME + " --sampling-args '{\"temperature\": 0.7}'" + " --extra" * 10
    with RichDisplay(console, clock=FakeClock()) as d:
        d.start(**START)
        d.progress(done=10, total=10, stats=stats(10))
        d.finish(status="completed", summary=FULL, run_dir="runs/abc", resume_command=long_resume)
    text = ANSI.sub("", console.file.getvalue())
    assert "Eval completed" in text.splitlines()  # on its own line, below the final frame
    assert "Eval summary" in text and "0.512 ± 0.231" in text
    assert f"Resume with: {long_resume}" in text.splitlines()  # one line, though wider than 100


@pytest.mark.parametrize("exc", [RuntimeError("boom"), KeyboardInterrupt()])
def test_rich_display_restores_terminal_when_an_exception_passes(exc):
    console, stdout_before = rich_console(), sys.stdout
    with pytest.raises(type(exc)):
        with RichDisplay(console, clock=FakeClock()) as d:
            d.start(**START)
            d.progress(done=3, total=10, stats=stats(3))
            assert sys.stdout is not stdout_before  # live view redirects prints above the panel
            raise exc
    assert sys.stdout is stdout_before
    assert not d._live.is_started
    raw = console.file.getvalue()
    assert raw.rfind("\x1b[?25h") > raw.rfind("\x1b[?25l")  # cursor shown again at the end
    assert "3/10" in ANSI.sub("", raw)


# --- summary renderers ------------------------------------------------------------------------

def render(summary) -> str:
    console = Console(file=io.StringIO(), width=140, color_system=None)
    render_summary(summary, console)
    return console.file.getvalue()


def test_render_summary_full():
    text = render(FULL)
    for needle in ("0.512 ± 0.231", "exact_match", "format_ok", "0.900", "0.050",
                   "pass@1=0.500", "pass@2=0.625", "pass@4=0.750", "completed: 77", "max_turns: 3",
                   "2.5%", "TimeoutError: 2", "Reward-fn errors", "score_fn: 3",
                   "1200 ms", "2400 ms", "12,345", "6,789", "1.2%", "Per task"):
        assert needle in text, needle
    task_rows = {line.split()[1]: line for line in text.splitlines() if "algebra" in line or "geometry" in line}
    assert set(task_rows) == {"algebra", "geometry"}
    assert "0.700 ± 0.200" in task_rows["algebra"] and "0.650" in task_rows["algebra"]
    assert "0.324" in task_rows["geometry"] and "5.0%" in task_rows["geometry"]


def test_render_summary_highlights_reward_function_errors():
    console = Console(file=io.StringIO(), force_terminal=True, width=120)
    render_summary({"metrics_errors": {"score_fn": 3, "fine_fn": 0}}, console)
    raw = console.file.getvalue()
    assert re.search(r"\x1b\[1;31m3 failed calls \(score_fn: 3\)", raw)
    assert "fine_fn" not in raw


@pytest.mark.parametrize("summary", [
    {},
    None,
    {"avg_reward": None, "avg_metrics": None, "pass_at_k": None, "timing": {"p95_total_ms": None},
     "usage": {}, "per_task": {"t1": None}, "error_kinds": "oops"},
    {"avg_reward": 0.25, "avg_metrics": {"acc": 0.5}, "pass_at_k": {"1": 0.25, "k10": 0.75}},
])
def test_render_summary_partial_never_crashes(summary):
    text = render(summary)
    plain = summary_text(summary)
    assert "Eval summary" in text
    if not summary:
        assert "none" in text and plain == "No results."
    if summary and summary.get("avg_reward") == 0.25:
        assert "Reward: 0.250" in plain and "acc" in plain and "acc" in text
        assert "pass@1=0.250  pass@k10=0.750" in plain
        assert "±" not in plain  # no std given, none shown


def test_summary_text_is_plain_and_has_tables():
    text = summary_text(FULL)
    assert "\x1b" not in text
    assert "Reward: 0.512 ± 0.231" in text and "Reward-fn errors: 3 failed calls (score_fn: 3)" in text
    assert re.search(r"exact_match\s+0\.500\s+0\.100", text)
    assert re.search(r"algebra\s+40\s+0\.700 ± 0\.200\s+0\.0%\s+0\.700\s+0\.650", text)


# --- make_display -----------------------------------------------------------------------------

def test_make_display_picks_by_mode_and_stream(monkeypatch):
    monkeypatch.setenv("TERM", "xterm-256color")
    tty, pipe = TtyStringIO(), io.StringIO()
    rich = make_display("auto", tty)
    assert isinstance(rich, RichDisplay) and rich.console.file is tty
    assert isinstance(make_display("auto", pipe), PlainDisplay)
    assert isinstance(make_display("plain", tty), PlainDisplay)
    assert isinstance(make_display("rich", pipe), RichDisplay)
    json_display = make_display("json", pipe)
    assert isinstance(json_display, JsonDisplay) and json_display.stream is pipe
    monkeypatch.setenv("TERM", "dumb")
    assert isinstance(make_display("auto", tty), PlainDisplay)
    assert isinstance(make_display(None, tty), PlainDisplay)  # None means auto
    with pytest.raises(ValueError, match="unknown display mode"):
        make_display("fancy", pipe)


def test_rich_display_survives_bad_progress_values():
    console = rich_console()
    with RichDisplay(console, clock=FakeClock()) as d:
        d.start(**START)
        d.progress(done=2, total=None, stats={"avg_metrics": "?", "errors": None})
    assert "progress display error" in ANSI.sub("", console.file.getvalue())
    assert not d._live.is_started


def test_base_display_is_a_no_op_context_manager():
    with EvalDisplay() as d:
        d.start(**START)
        d.progress(done=1, total=10, stats={})
        d.message("hi")
        d.finish(status="failed", summary={}, run_dir=None)
    assert isinstance(d, EvalDisplay)
