"""Run health: the model-call retries of a run and the error budget that decides its final status.

A run whose every rollout finished but more than `max_error_rate` of them errored, or all of them, ends with
status `completed_with_errors` (exit code 1), not `completed`: its averages leave errored rollouts out
(`avg_reward_errors_as_zero` is the mean with them as 0). A run clearly over the budget stops early
(`budget_stop_reason`): status `failed`, exit 1, finished by `--retry-errors DIR`, not `-R`.
metadata.json records `retries` (this run's and its resumes' model-call retries, by kind) and
`error_budget` (the rate, the limit, and whether it was exceeded). `completed_with_errors` is not
an unfinished status: `-R` skips it (nothing is missing); `--retry-errors DIR` reruns the errors.
"""

from __future__ import annotations

from typing import Any

from prime_cli.records.eval_run import Summary
from prime_cli.results.error_budget import clearly_over_budget
from prime_cli.runs.status import RunStatus


def run_retries(pool: Any, previous: Any = None) -> dict[str, Any]:
    """This process's retries (from the client pool) plus those an earlier part of the run recorded."""
    from prime_cli.clients.retry import RetryCounts  # lazy: start-up

    counts = RetryCounts()
    if isinstance(previous, dict):
        counts.add(previous)
    if hasattr(pool, "retry_counts"):
        counts.add(pool.retry_counts())
    return counts.as_dict()


def error_budget(errored: int, rollouts: int, max_error_rate: float) -> dict[str, Any]:
    rate = errored / rollouts if rollouts else 0.0
    return {"max_error_rate": max_error_rate, "error_rate": rate, "errored_rollouts": errored,
            "rollouts": rollouts, "exceeded": rate > max_error_rate}


BUDGET_MIN_ROLLOUTS = 20


def budget_stop_reason(errored: int, finished: int, max_error_rate: float) -> str | None:
    """Why a run should stop now (its endpoint or environment is broken), or None. The rule (the trainer's
    too, results/error_budget.py): at least BUDGET_MIN_ROLLOUTS finished in this process, and the lower end
    of the error rate's 95% interval above `max_error_rate`. All of 20 failing stops; 3 of 20 (which luck
    explains) does not; the end-of-run budget check still judges a run that goes on."""
    if not clearly_over_budget(errored, finished, max_error_rate, BUDGET_MIN_ROLLOUTS):
        return None
    return (f"error budget exceeded: {errored} of {finished} rollouts errored ({100 * errored / finished:.1f}%), "
            f"above --max-error-rate {100 * max_error_rate:.1f}%")


def first_errors(rows: list[Any], most: int = 3) -> str:
    """The first distinct errors of `rows`, 'type: message (xN)', one line: what stopped the run."""
    counts: dict[str, int] = {}
    for row in rows:
        error = row.get("error")
        if isinstance(error, dict):
            text = " ".join(f"{error.get('type', 'Error')}: {error.get('message', '')}".split())
            key = text if len(text) <= 160 else text[:157] + "..."
            counts[key] = counts.get(key, 0) + 1
    shown = [f"{text} (x{count})" if count > 1 else text for text, count in list(counts.items())[:most]]
    return "; ".join(shown) + (f"; and {len(counts) - most} other kinds" if len(counts) > most else "")


def every_rollout_errored(budget: dict[str, Any]) -> bool:
    """No rollout was scored: each errored (a model call, the environment or a weighted reward function)."""
    rollouts = budget.get("rollouts") or 0
    return rollouts > 0 and budget.get("errored_rollouts") == rollouts


def final_status(status: RunStatus, budget: dict[str, Any]) -> RunStatus:
    """`completed` becomes `completed_with_errors` when the error budget is exceeded, and when every rollout
    errored (whatever --max-error-rate allows: a run that scored nothing did not succeed)."""
    failed = budget.get("exceeded") or every_rollout_errored(budget)
    return RunStatus.COMPLETED_WITH_ERRORS if status == RunStatus.COMPLETED and failed else status


def failed_before_any_rollout(status: RunStatus, summary: Summary) -> bool:
    """The run failed (an unreachable server, a bad key) before a rollout finished: its summary would be
    all zeros, so the display shows only the retries, and the CLI the one error line."""
    return status == RunStatus.FAILED and not summary.get("num_rollouts")


def status_label(status: RunStatus) -> str:
    return str(status).replace("_", " ")


def _plural(count: int, word: str, plural: str | None = None) -> str:
    return f"{count:,} {word if count == 1 else plural or word + 's'}"


def retry_text(retries: Any) -> str | None:
    """'5 retries of 4 model calls (429: 1, 5xx: 1, ...)', or None when nothing was retried."""
    if not isinstance(retries, dict) or not retries.get("retries"):
        return None
    kinds = retries.get("by_kind") if isinstance(retries.get("by_kind"), dict) else {}
    text = (f"{_plural(int(retries['retries']), 'retry', 'retries')} of "
            f"{_plural(int(retries.get('calls_retried') or 0), 'model call')}")
    if kinds:
        text += " (" + ", ".join(f"{kind}: {count}" for kind, count in kinds.items()) + ")"
    if retries.get("gave_up"):
        text += f"; {_plural(int(retries['gave_up']), 'call')} still failed"
    return text


def health_rows(summary: Summary) -> list[tuple[str, str, str]]:
    """(label, value, style) lines for the end-of-run summary: retries, and an exceeded error budget."""
    rows: list[tuple[str, str, str]] = []
    if text := retry_text(summary.get("retries")):
        rows.append(("Retries", text, "yellow"))
    budget = summary.get("error_budget")
    if isinstance(budget, dict) and every_rollout_errored(budget) and not budget.get("exceeded"):
        rows.append(("Error budget", f"every rollout errored ({budget['errored_rollouts']} of {budget['rollouts']}): "
                     "nothing was scored", "bold red"))
    if isinstance(budget, dict) and budget.get("exceeded"):
        rows.append(("Error budget", f"{budget['errored_rollouts']} of {budget['rollouts']} rollouts "
                     f"({100 * budget['error_rate']:.1f}%) errored, above --max-error-rate "
                     f"{100 * budget['max_error_rate']:.1f}%", "bold red"))
    return rows
