"""Errored rollouts: what failed in a rollout, the once-per-error log, and the step's fault line.

A rollout is errored when
- the model call or the environment raised (`state["error"]`; its kind is the error's type). An error
  the policy caused (`POLICY_ERROR_TYPES`, a tool's stop_errors) keeps reward 0 in its group's baseline
  and trains no token; any other leaves its group;
- it came back without token ids (kind: the server's refusal, e.g. `OverlongPromptError` when vLLM
  refused `max_tokens + prompt` beyond `max_model_len`, else `NoTokens`): it leaves its group;
- a reward function with a non-zero weight raised (kind `reward:<function>`): the rubric scored it 0.0,
  a score nobody gave, so the rollout leaves its group rather than train on it.
A zero-weight metric that raised does not change the reward: the rollout is trained on, and the failure
is counted (`metric_error_rate`) and logged. Each distinct error (kind and message) is written once to
stderr, which the launcher sends to logs/orchestrator.log, with the first occurrence's traceback.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass
from typing import Any, TextIO

from prime_cli.envs.errors import mask_secrets
from prime_cli.train.plugin_api import clearly_over_budget

FAULT_EXIT_CODE = 3  # the orchestrator stopped the run: its last stderr line is `fatal: <cause>`
FATAL_PREFIX = "fatal: "  # of that last line, which the launcher reads back
MESSAGES_PER_KIND = 10  # distinct messages logged per kind; later ones are only counted
MAX_MESSAGE_CHARS = 500  # of an error's message in the one-line fatal cause
MIN_JUDGED_ROLLOUTS = 64  # max_error_rate is judged on the run's rollouts once there are this many (an eval: 20)


@dataclass(frozen=True)
class RolloutError:
    kind: str  # the error_rate/<kind> it counts in: an error type, "reward:<func>" or "metric:<func>"
    text: str  # "Type: message" or "reward function f raised Type: message"
    traceback: str = ""
    policy: bool = False  # caused by the policy: reward 0 in the baseline, not a fault of the run

    def one_line(self) -> str:
        text = " ".join(mask_secrets(self.text).split())
        return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 3] + "..."


def state_error(state: dict[str, Any], policy_types: frozenset[str]) -> RolloutError | None:
    """The rollout's own error (the model call or the environment raised), if any. The rubric's
    RewardFunctionError is not one: `scoring_errors` counts it by function (kind `reward:<function>`)."""
    error = state.get("error") or {}
    if not error or error.get("type") == "RewardFunctionError":
        return None
    kind = str(error.get("type") or "Error")
    return RolloutError(kind, f"{kind}: {error.get('message') or kind}", str(state.get("error_traceback") or ""),
                        policy=kind in policy_types)


def no_tokens_error(state: dict[str, Any], reason: str) -> RolloutError:
    """A rollout without token ids: the server's refusal when it gave one (a prompt too long), else `reason`."""
    refusal = state.get("prompt_too_long_error") or {}
    if refusal:
        kind = str(refusal.get("type") or "OverlongPromptError")
        return RolloutError(kind, f"{kind}: {refusal.get('message') or kind}")
    return RolloutError("NoTokens", f"NoTokens: {reason}")


def scoring_errors(state: dict[str, Any]) -> tuple[list[RolloutError], list[RolloutError]]:
    """(failed reward functions with a non-zero weight, failed zero-weight metrics). A rubric that recorded
    no weights (no metrics_error_details) has each failure counted as a reward function's."""
    details = state.get("metrics_error_details")
    records = details if isinstance(details, list) else state.get("metrics_errors") or []
    rewards, metrics = [], []
    for record in records:
        if not isinstance(record, dict):
            record = {"func": "?", "type": "Error", "message": str(record)}
        func, kind = str(record.get("func") or "?"), str(record.get("type") or "Error")
        text = f"{kind}: {record.get('message') or kind}"
        weight = record.get("weight", 1.0)
        if isinstance(weight, (int, float)) and weight == 0:
            metrics.append(RolloutError(f"metric:{func}", f"metric {func} raised {text}",
                                        str(record.get("traceback") or "")))
        else:
            rewards.append(RolloutError(f"reward:{func}", f"reward function {func} raised {text}",
                                        str(record.get("traceback") or "")))
    return rewards, metrics


class ErrorLog:
    """Writes each distinct rollout error once (to stderr: logs/orchestrator.log), with its traceback, and
    remembers the step's first errors for the fatal line."""

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream  # None: sys.stderr when written (so that tests' capture sees it)
        self.step = 0
        self.seen: set[tuple[str, str]] = set()
        self.messages_per_kind: Counter[str] = Counter()
        self.first: RolloutError | None = None  # this step's first error of a rollout (a metric's is not)
        self.first_fault: RolloutError | None = None  # of those, the first the policy did not cause
        self.run_failed, self.run_sampled, self.first_step = 0, 0, 0  # this run's finished steps

    def begin_step(self, step: int) -> None:
        self.step, self.first, self.first_fault = step, None, None
        self.first_step = self.first_step or step

    def end_step(self, failed: int, sampled: int) -> None:
        """Count a finished step's failed (not the policy's) and sampled rollouts in the run's rate."""
        self.run_failed += failed
        self.run_sampled += sampled

    @property
    def before(self) -> tuple[int, int, int]:
        return self.run_failed, self.run_sampled, self.first_step

    def add(self, error: RolloutError) -> None:
        if not error.kind.startswith("metric:"):  # a failed zero-weight metric errs no rollout
            self.first = self.first or error
            if not error.policy:
                self.first_fault = self.first_fault or error
        key = (error.kind, error.text)
        if key in self.seen or self.messages_per_kind[error.kind] > MESSAGES_PER_KIND:
            return
        self.seen.add(key)
        self.messages_per_kind[error.kind] += 1
        stream = self.stream or sys.stderr
        if self.messages_per_kind[error.kind] > MESSAGES_PER_KIND:
            print(f"rollout error [{error.kind}]: more than {MESSAGES_PER_KIND} distinct messages; later ones "
                  "are counted, not logged", file=stream, flush=True)
            return
        where = f" at step {self.step}" if self.step else ""
        print(f"rollout error{where} [{error.kind}] (each distinct error is logged once): {mask_secrets(error.text)}",
              file=stream, flush=True)
        if error.traceback:
            print(error.traceback.rstrip("\n"), file=stream, flush=True)


def rate_fault(step: int, failed: int, sampled: int, policy_errors: int, max_error_rate: float,
               first: RolloutError | None, before: tuple[int, int, int] = (0, 0, 0)) -> str | None:
    """The fatal cause when the rollouts failed past max_error_rate (errors the policy caused are not
    failures of the run: they train as reward 0); else None. `before` is (failed, sampled, first step) of
    this run's earlier steps. A step whose every rollout failed is judged at once (nothing of it trains);
    otherwise the run's rate so far, by the eval's rule (`clearly_over_budget`, from MIN_JUDGED_ROLLOUTS
    on): the lower end of its 95% interval above max_error_rate. Two unlucky rollouts of a 16-rollout
    step must not stop a run (they are never trained on either way)."""
    rate_note = f" without {policy_errors} errors of the policy's own" if policy_errors else ""
    if sampled and failed == sampled:
        if failed / sampled <= max_error_rate:
            return None
        cause = (f"{failed} of {sampled} rollouts failed at step {step} "
                 f"(error_rate {failed / sampled:.2f}{rate_note} > orchestrator.max_error_rate {max_error_rate:g})")
    else:
        judged_failed, judged_sampled = before[0] + failed, before[1] + sampled
        if not clearly_over_budget(judged_failed, judged_sampled, max_error_rate, MIN_JUDGED_ROLLOUTS):
            return None
        where = f"at step {step}" if not before[1] else f"in steps {before[2]}-{step}"
        cause = (f"{judged_failed} of {judged_sampled} rollouts failed {where} (error_rate "
                 f"{judged_failed / judged_sampled:.2f}{rate_note}, the lower end of its 95% interval above "
                 f"orchestrator.max_error_rate {max_error_rate:g})")
    return cause + (f"; first error: {first.one_line()}" if first else "")


def empty_batch_fault(step: int, sampled: int, errored: int, first: RolloutError | None,
                      rollouts_per_example: int, seq_len: int) -> str:
    """The fatal cause of a step whose batch holds no trainable sample."""
    cause = f"no trainable sample at step {step}"
    if errored:
        cause += f": {errored} of {sampled} rollouts errored"
    elif rollouts_per_example < 2:
        cause += (": a group of 1 rollout has no baseline to compare with "
                  "(set orchestrator.rollouts_per_example to 2 or more)")
    else:
        cause += f": no rollout of {sampled} kept a completion token within seq_len {seq_len}"
    return cause + (f"; first error: {first.one_line()}" if first else "")
