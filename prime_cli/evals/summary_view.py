"""The end-of-run summary, as a rich panel with tables or as plain text."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from prime_cli.results.cost import cost_text
from prime_cli.results.intervals import shown_bounds
from prime_cli.results.reward_signal import reward_signal_lines
from prime_cli.runs.visible import visible_data

from .health import health_rows
from .sandboxing import summary_text as sandbox_text


def _d(mapping: Any, key: str) -> dict:
    value = mapping.get(key) if isinstance(mapping, dict) else None
    return value if isinstance(value, dict) else {}


def _num(x: Any, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return str(x)
    if isinstance(x, int):
        return f"{x:,}"
    return f"{x:.{digits}f}" if math.isfinite(x) else str(x)


def _pct(x: Any) -> str:
    return f"{100 * x:.1f}%" if isinstance(x, (int, float)) else "-"


def _dur(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "--:--"
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def _counts(d: dict) -> str:
    return ", ".join(f"{k}: {_num(v)}" for k, v in sorted(d.items(), key=lambda kv: str(kv[0])))


def _mean_std(mean: Any, std: Any) -> str:
    return _num(mean) if std is None else f"{_num(mean)} ± {_num(std)}"


def _with_interval(interval: Any, std: Any) -> str:
    """`0.412 [0.351, 0.473] (95% CI, clustered by example, 50 examples); std 0.310`."""
    std_text = "" if std is None else f"; std {_num(std)}"
    return f"{interval['label']}{std_text}"


def _bracket(interval: Any) -> str:
    """` [low, high]`; nothing when the interval is missing or has no width (every example scored the same)."""
    bounds = shown_bounds(interval)
    return "" if bounds is None else f" [{_num(bounds[0])}, {_num(bounds[1])}]"


def _power_text(power: dict) -> str:
    needed, delta = power.get("examples_needed"), _num(power.get("delta"))
    if not needed:
        note = power.get("note") or "fewer than 2 examples"
        if power.get("reason") == "no_spread":  # summary.power_record
            return f"examples needed to detect a difference of {delta}: cannot be estimated: {note}"
        return f"examples needed to detect a difference of {delta}: not computable ({note})"
    return (f"about {needed} examples per run to detect a difference of {delta} against another run (80% power, "
            f"5% two-sided; this run has {_num(power.get('examples'))}); `prime eval compare --power` sharpens it "
            "with the paired spread")


def _errored(s: dict) -> int:
    """Errored rollouts a summary's scores leave out (0 for summaries written before they were left out)."""
    total, scored = s.get("num_rollouts"), s.get("num_scored")
    return total - scored if isinstance(total, int) and isinstance(scored, int) else 0


def _pass_rows(s: dict, intervals: dict) -> list[tuple[str, str, str]]:
    """pass@k (at least one of k rollouts passes) and pass^k (all k pass), each k with its interval."""
    rows = []
    for key, label, sign in (("pass_at_k", "pass@k", "@"), ("pass_hat_k", "pass^k", "^")):
        if values := _d(s, key):
            order = sorted(values, key=lambda k: (not str(k).isdigit(), int(k) if str(k).isdigit() else 0, str(k)))
            cis = _d(intervals, key)
            rows.append((label, "  ".join(f"pass{sign}{k}={_num(values[k])}{_bracket(cis.get(str(k)))}"
                                          for k in order), ""))
    return rows


def _overview(s: dict) -> list[tuple[str, str, str]]:
    """(label, value, style) lines of the summary that are present in ``s``."""
    rows: list[tuple[str, str, str]] = []
    if s.get("num_rollouts") is not None:
        shape = f" ({_num(s.get('num_examples'))} examples x {_num(s.get('rollouts_per_example'))})"
        rows.append(("Rollouts", _num(s["num_rollouts"]) + shape, ""))
    intervals = _d(s, "ci95")
    errored = _errored(s)
    if s.get("avg_reward") is not None:
        reward_ci = intervals.get("reward")
        text = (_with_interval(reward_ci, s.get("std_reward")) if isinstance(reward_ci, dict)
                else _mean_std(s["avg_reward"], s.get("std_reward")))
        if errored:
            text += (f"; {_num(s.get('num_scored'))} scored rollouts; {_num(errored)} errored left out "
                     f"({_num(s.get('avg_reward_errors_as_zero'))} with them as 0)")
        rows.append(("Reward", text, "bold"))
    elif errored and not s.get("num_scored"):
        rows.append(("Reward", f"none: no rollout was scored ({_num(errored)} errored)", "bold red"))
    if power := _d(s, "power"):
        rows.append(("Power", _power_text(power), ""))
    rows += _pass_rows(s, intervals)
    if stops := _d(s, "stop_conditions"):
        rows.append(("Stop conditions", _counts(stops), ""))
    kinds = _d(s, "error_kinds")
    if s.get("avg_error") is not None or kinds:
        rows.append(("Errors", _pct(s.get("avg_error")) + (f" ({_counts(kinds)})" if kinds else ""),
                     "red" if s.get("avg_error") or any(kinds.values()) else "green"))
    if metric_errors := {k: v for k, v in _d(s, "metrics_errors").items() if v}:
        total = sum(v for v in metric_errors.values() if isinstance(v, (int, float)))
        rows.append(("Reward-fn errors", f"{_num(total)} failed calls ({_counts(metric_errors)})", "bold red"))
    if timing := _d(s, "timing"):
        parts = [f"{name} {_num(timing.get(key), 0)} ms" for name, key in (
            ("generation", "avg_generation_ms"), ("scoring", "avg_scoring_ms"), ("total", "avg_total_ms"),
            ("p50", "p50_total_ms"), ("p95", "p95_total_ms")) if timing.get(key) is not None]
        if parts:
            rows.append(("Timing", "  ".join(parts), ""))
    if usage := _d(s, "usage"):
        parts = [f"{kind} {_num(usage.get(f'{kind}_tokens'))} (avg {_num(usage.get(f'avg_{kind}_tokens'), 1)})"
                 for kind in ("prompt", "completion")
                 if usage.get(f"{kind}_tokens") is not None or usage.get(f"avg_{kind}_tokens") is not None]
        if parts:
            rows.append(("Tokens", "  ".join(parts), ""))
    if text := cost_text(s.get("cost")):
        rows.append(("Cost", text, "yellow" if text.startswith("unknown") else ""))
    if text := sandbox_text(s.get("sandbox")):
        rows.append(("Sandboxes", text, "bold red" if "unsandboxed" in text else ""))
    if s.get("is_truncated") is not None:
        rows.append(("Truncated", _pct(s["is_truncated"]), "yellow" if s["is_truncated"] else ""))
    return rows + reward_signal_lines(s) + health_rows(s)


def _metric_table(s: dict) -> tuple[list[str], list[list[str]]]:
    means, stds = _d(s, "avg_metrics"), _d(s, "std_metrics")
    names = list(dict.fromkeys([*means, *stds]))
    cis = _d(_d(s, "ci95"), "metrics")
    if not cis:
        return ["metric", "mean", "std"], [[str(n), _num(means.get(n)), _num(stds.get(n))] for n in names]
    return (["metric", "mean", "95% CI", "std"],
            [[str(n), _num(means.get(n)), _bracket(cis.get(n)).strip() or "-", _num(stds.get(n))] for n in names])


def _task_table(s: dict) -> tuple[list[str], list[list[str]]]:
    tasks = {str(k): v if isinstance(v, dict) else {} for k, v in _d(s, "per_task").items()}
    metrics = list(dict.fromkeys(m for t in tasks.values() for m in _d(t, "avg_metrics")))
    with_pass1 = any("1" in {str(k) for k in _d(t, "pass_at_k")} for t in tasks.values())
    headers = ["task", "rollouts", "reward", "errors", *(["pass@1"] if with_pass1 else []), *metrics]
    rows = []
    for name, t in tasks.items():
        pass1 = {str(k): v for k, v in _d(t, "pass_at_k").items()}.get("1")
        rows.append([name, _num(t.get("num_rollouts")), _mean_std(t.get("avg_reward"), t.get("std_reward")),
                     _pct(t.get("avg_error")), *([_num(pass1)] if with_pass1 else []),
                     *(_num(_d(t, "avg_metrics").get(m)) for m in metrics)])
    return headers, rows


def _text_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(c) for c in col) for col in zip(headers, *rows, strict=True)]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [headers, *rows]]


def summary_text(summary: dict) -> str:
    """The summary as plain text (no ANSI codes; task, metric, error and stop names escaped)."""
    s = visible_data(summary) if isinstance(summary, dict) else {}
    lines = [f"{label}: {value}" for label, value, _ in _overview(s)] or ["No results."]
    for title, (headers, rows) in (("Metrics", _metric_table(s)), ("Per task", _task_table(s))):
        if rows:
            lines += [f"{title}:", *_text_table(headers, rows)]
    return "\n".join(lines)


def render_summary(summary: dict, console: Console) -> None:
    """Print the summary: overview panel, metrics table and per-task table."""
    s = visible_data(summary) if isinstance(summary, dict) else {}  # names from the data set and environment
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold cyan")
    grid.add_column()
    for label, value, style in _overview(s) or [("Results", "none", "dim")]:
        grid.add_row(label, Text(value, style=style))
    console.print(Panel(grid, title="Eval summary", title_align="left", expand=False))
    for title, (headers, rows) in (("Metrics", _metric_table(s)), ("Per task", _task_table(s))):
        if rows:
            table = Table(*headers, title=title, title_justify="left", header_style="bold")
            for row in rows:
                table.add_row(*(Text(c, justify="left" if i == 0 else "right") for i, c in enumerate(row)))
            console.print(table)
