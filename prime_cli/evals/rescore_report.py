"""What `prime eval rescore` prints: a progress bar while scoring, then the new run's summary and its
paired difference to the source run (overall and per reward function), or the same as one JSON line."""

from __future__ import annotations

import json
import shlex
import sys
from typing import Any

from prime_cli.results.compare import CompareError, compare_runs, comparison_json, comparison_lines
from prime_cli.runs.status import RunStatus
from prime_cli.runs.visible import json_visible

from .rescore import RescoreOutcome, rescore


def _progress_bar() -> tuple[Any, Any]:
    """A rich progress bar on a terminal's stderr; nothing in a pipe."""
    if not sys.stderr.isatty():
        return None, None
    from rich.console import Console  # lazy: heavy
    from rich.progress import (  # lazy: heavy
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    bar = Progress(TextColumn("rescoring"), BarColumn(), MofNCompleteColumn(), TextColumn("examples"),
                   TimeRemainingColumn(), console=Console(stderr=True), transient=True)
    return bar, bar.add_task("rescore", total=None)


def run_rescore(path: str, env_args: dict[str, Any] | None, output_dir: str | None, resume: str | None,
                max_concurrent: int, as_json: bool) -> int:
    """Rescore, print, and return the exit code (0 completed, 1 cancelled)."""
    bar, task = _progress_bar()

    def progress(done: int, total: int) -> None:
        if bar is not None:
            bar.update(task, completed=done, total=total)

    if bar is not None:
        bar.start()
    try:
        outcome = rescore(path, env_args, output_dir, resume, max_concurrent, progress)
    finally:
        if bar is not None:
            bar.stop()
    try:
        comparison: Any = compare_runs(str(outcome.source.source_path), str(outcome.run_dir))
    except CompareError as exc:  # e.g. every saved rollout errored: nothing to pair; the new run is still written
        comparison = str(exc)
    if as_json:
        event = {"event": "done", "status": outcome.status, "run_dir": str(outcome.run_dir),
                 "source": str(outcome.source.source_path), "summary": outcome.summary,
                 "difference": comparison_json(comparison) if not isinstance(comparison, str) else None}
        if isinstance(comparison, str):
            event["not_compared"] = comparison
        print(json_visible(json.dumps(event, ensure_ascii=False, default=str)))
    else:
        _print_report(outcome, comparison)
    return 0 if outcome.status == RunStatus.COMPLETED else 1


def _print_report(outcome: RescoreOutcome, comparison: Any) -> None:
    from rich.console import Console  # lazy: heavy

    from .summary_view import render_summary  # lazy: heavy

    console = Console()
    render_summary(outcome.summary, console)
    if isinstance(comparison, str):
        print(f"\nRescored (B) against the saved rewards (A): not compared: {comparison}")
    else:
        print("\nRescored (B) against the saved rewards (A):")
        for line in comparison_lines(comparison):
            print(line, file=sys.stderr if line.startswith("warning: ") else sys.stdout)
    print(f"Results: {outcome.run_dir}")
    if outcome.status != RunStatus.COMPLETED:
        print("Resume with: " + shlex.join(["prime", "eval", "rescore", str(outcome.source.source_path.resolve()),
                                            "--resume", str(outcome.run_dir.resolve())]))
