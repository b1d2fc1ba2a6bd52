"""Rollout states rebuilt from saved rows, for re-running a rubric without the policy model.

A saved row holds what results.jsonl keeps (prompt, completion, answer, info, ...) plus the
`--state-columns` the run saved. A reward function that reads a state key the run did not save
would score differently (or fail) on the rebuilt state: `RebuiltState` records such reads so that
the rescore can refuse in one line instead of writing wrong rewards.
"""

from __future__ import annotations

from typing import Any

from prime_cli.envs.chat_messages import as_chat_messages
from prime_cli.envs.types import State
from prime_cli.records.eval_run import ROW_KEYS, Rollout

from .store import unscored_if_errored

# keys the rollout loop sets that results.jsonl does not keep (unless saved with -C)
UNSAVED_LOOP_KEYS = ("trajectory", "responses")
_MISSING = object()


class RebuiltState(State):
    """A State that remembers the keys read while absent and never written afterwards."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.absent_reads: set[str] = set()
        self.written: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        if key not in self and key not in self.written:
            self.absent_reads.add(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        value = super().get(key, _MISSING)
        if value is _MISSING:
            if key in UNSAVED_LOOP_KEYS and key not in self.written:
                self.absent_reads.add(key)  # optional reads of other keys may be the environment's own default
            return default
        return value

    def __setitem__(self, key: str, value: Any) -> None:
        self.written.add(key)
        super().__setitem__(key, value)

    def setdefault(self, key: str, default: Any = None) -> Any:
        self.written.add(key)
        return super().setdefault(key, default)

    def missing_keys(self) -> set[str]:
        """Keys a reward function needed that the row did not have (read absent, never set)."""
        return {key for key in self.absent_reads if key not in self.written}


def _turns(completion: Any) -> int:
    if isinstance(completion, list):
        return sum(1 for message in completion if isinstance(message, dict) and message.get("role") == "assistant")
    return 1 if completion else 0


def state_from_row(row: Rollout) -> RebuiltState:
    """The state a rubric saw for this row, as far as the row keeps it (saved state columns included)."""
    state = RebuiltState(
        prompt=as_chat_messages(row.get("prompt")),  # reward functions read them as objects too (m.content)
        completion=as_chat_messages(row.get("completion")) if row.get("completion") is not None else [],
        answer=row.get("answer", ""),
        task=row.get("task") or "default",
        info=dict(row.get("info") or {}),
        example_id=row.get("example_id"),
        turn=_turns(row.get("completion")),
        reward=None,
        metrics={},
        metrics_errors=[],
        is_completed=bool(row.get("is_completed")),
        is_truncated=bool(row.get("is_truncated")),
        stop_condition=row.get("stop_condition"),
        error=row.get("error"),
        timing=dict(row.get("timing") or {}),
        usage=dict(row.get("token_usage") or {}),
    )
    for key, value in row.items():
        if key not in ROW_KEYS:  # a --state-columns column
            dict.__setitem__(state, key, value)
    state.written.clear()
    return state


def rescored_row(row: Rollout, state: State) -> Rollout:
    """The source row with the new reward, metrics, metrics_errors and error (and the new scoring time): a
    reward function that fails now errs the row, one that no longer fails clears its RewardFunctionError."""
    timing = dict(row.get("timing") or {})
    scoring_ms = float((state.get("timing") or {}).get("scoring_ms") or 0.0)
    timing["scoring_ms"] = scoring_ms
    if "generation_ms" in timing:
        timing["total_ms"] = float(timing.get("generation_ms") or 0.0) + scoring_ms
    new: Rollout = dict(row)  # type: ignore[assignment]
    new.update(reward=state.get("reward"), metrics=dict(state.get("metrics") or {}),
               metrics_errors=list(state.get("metrics_errors") or []), error=state.get("error"), timing=timing,
               judge_usage=state.get("judge_usage"))  # this rescore's judge calls, not the source's
    return unscored_if_errored(new)  # an errored rollout stays unscored (reward and metrics null)
