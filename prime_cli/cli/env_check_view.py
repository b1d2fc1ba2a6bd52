"""Printing `prime env check`'s report: the score table, then one line per problem."""

from __future__ import annotations

from typing import Any

from prime_cli.runs.visible import visible


def print_report(report: Any) -> None:
    from rich.console import Console  # lazy: start-up
    from rich.table import Table  # lazy: start-up

    from prime_cli.workspace.env_check import REWARD  # lazy: start-up

    console = Console()
    if not console.is_terminal:
        console = Console(width=10_000)
    say = lambda text: console.print(visible(text, multiline=True), soft_wrap=True, highlight=False, markup=False)  # noqa: E731
    if report.reference_writing:
        say(f"{report.env_id}: {report.examples} eval rows, reference answers written {report.reference_writing}")
    else:
        say(f"{report.env_id}: {report.examples} eval rows")
    if report.table:
        kinds = list(next(iter(report.table.values())))
        table = Table("reward function", "weight", *[k.replace("_", " ") for k in kinds], box=None,
                      title="mean score per reply kind", title_justify="left")
        for func, scores in report.table.items():
            weight = "" if func == REWARD else f"{report.weights.get(func, 0):g}"
            cells = [_cell(report, func, scores[k]) for k in kinds]
            table.add_row(visible(func), weight, *cells)
        console.print(table)
    for note in report.notes:
        say(f"note: {note}")
    not_checked = getattr(report, "not_checked", [])
    for line in not_checked:
        say(f"not checked: {line}")
    for problem in report.problems:
        say(f"problem: {problem}")
    if not report.ok:
        say(f"{len(report.problems)} problem{'s' if len(report.problems) != 1 else ''}")
    elif not_checked:
        say(f"ok: no problem in what was checked ({len(not_checked)} not checked: see above)")
    else:
        say("ok: the reference gets the top reward and no reply kind is paid like it")


def _cell(report: Any, func: str, score: float | None) -> str:
    if func in report.skipped:
        return "skipped"
    if score is None:  # no rollout of this kind, or the function raised on every one (a problem line says so)
        return "error" if func in report.errored else "-"
    return f"{score:.2f}"
