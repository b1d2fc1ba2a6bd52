"""Reflection prompts fitted to the reflection model's context (its size: context_window.py).

A reflection prompt is the template, the current prompt (never cut: the reply rewrites it whole) and
examples. Too long for the context beside the reply's max_tokens, it is shortened, step by step until
it fits: the examples' long fields (inputs, outputs, answers, errors, state columns) cut to 2000, then
1000 characters (each message of a transcript to its share, so a long tool output loses its middle and
the turns around it stay; the system message that is the current prompt is named, not repeated); then
examples left out, the least needed first (the rows only shown, then further rollouts of a minibatch
row), down to one rollout of each fresh minibatch row; then those cut to 500, 250 and 120
characters. An example shown always keeps its reward, metrics, errors and stop condition.

When even the shortest does not fit, the proposal gives no prompt, and says why (a fruitless
reflection: the run may end early). A run whose seed prompt cannot fit at all is refused before the
seed is scored (`check_fits`), with the fixes: a reflection model of a longer context, a smaller
--minibatch-size, a smaller max_tokens for the reflection.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from prime_cli.envs.errors import EnvConfigError

from .context_window import TEMPLATE_TOKENS, ContextWindow
from .edit_step import edit_prompt
from .instructions import Instruction, instruction_lines
from .reflection import reflection_prompt, render_messages
from .rows import with_system

FIELD_CHARS = (2000, 1000)
SHORTEST_CHARS = (500, 250, 120)
FILLER = "the assistant wrote this reply at length before it gave an answer; "  # a long output, in prose


@dataclass(frozen=True)
class Shortening:
    chars: int | None  # each long field cut to about this many characters (None: as recorded)
    shown: int  # the examples shown: the first this many in the order of need


def ladder(total: int, essential: int) -> list[Shortening]:
    """The steps from the whole prompt to the shortest, longest first."""
    essential = min(essential, total)
    steps = [Shortening(None, total), *(Shortening(c, total) for c in FIELD_CHARS)]
    steps += [Shortening(FIELD_CHARS[-1], n) for n in range(total - 1, essential - 1, -1)]
    return steps + [Shortening(c, essential) for c in SHORTEST_CHARS]


@dataclass
class Fitted:
    text: str | None  # None: even the shortest is too long
    step: Shortening
    tokens: int = 0  # the text's tokens as counted (the shortest's, when it does not fit)


def fit(build: Callable[[Shortening], str], total: int, essential: int, window: ContextWindow | None) -> Fitted:
    """The longest prompt of the ladder that fits the window (the whole prompt when its context is unknown)."""
    whole = Shortening(None, total)
    if window is None or window.room is None:
        return Fitted(build(whole), whole)
    tokens, step = 0, whole
    for step in ladder(total, essential):
        text = build(step)
        tokens = window.tokens(text)
        if tokens <= window.room:
            return Fitted(text, step, tokens)
    return Fitted(None, step, tokens)


def need_order(rows: int, rollouts_per_row: int, fresh: int, total: int) -> list[int]:
    """Indices of a proposal's records (row by row, `rollouts_per_row` each, then the rows only shown), the
    most needed first: the first rollout of each fresh minibatch row, then the others in their order."""
    first = [i * rollouts_per_row for i in range(min(fresh, rows)) if i * rollouts_per_row < total]
    return first + [i for i in range(total) if i not in set(first)]


def fitted_reflection(current: str, records: Sequence[dict[str, Any]], metric_names: list[str], order: list[int],
                      essential: int, window: ContextWindow | None) -> Fitted:
    def build(step: Shortening) -> str:
        return reflection_prompt(current, [records[i] for i in sorted(order[:step.shown])], metric_names, step.chars)

    return fit(build, len(records), essential, window)


def fitted_edit(current: str, instructions: Sequence[Instruction], val_records: dict[int, dict[str, Any]],
                train_records: Sequence[dict[str, Any]], metric_names: list[str], order: list[int], essential: int,
                window: ContextWindow | None) -> Fitted:
    """The edit step's prompt: `order` ranks the train records; the validation evidence comes right after
    the essential ones (one rollout of each fresh minibatch row)."""
    val_rows = list(val_records)
    ranked = [("train", i) for i in order[:essential]] + [("val", row) for row in val_rows]
    ranked += [("train", i) for i in order[essential:]]

    def build(step: Shortening) -> str:
        chosen = set(ranked[:step.shown])
        val = {row: record for row, record in val_records.items() if ("val", row) in chosen}
        train = [record for i, record in enumerate(train_records) if ("train", i) in chosen]
        return edit_prompt(current, instructions, val, train, metric_names, step.chars)

    return fit(build, len(ranked), min(essential, len(train_records)), window)


def no_fit_reason(fitted: Fitted, window: ContextWindow) -> str:
    return (f"reflection prompt does not fit: {window.described()}, and even the shortest prompt of this proposal "
            f"needs about {fitted.tokens} beside the reply's max_tokens {window.max_tokens}")


def shortest_records(env: Any, seed_text: str, train: Sequence[dict[str, Any]], minibatch_size: int,
                     metric_names: list[str], state_columns: Sequence[str]) -> list[dict[str, Any]]:
    """Records as long as any the shortest prompt shows: the longest train inputs, outputs and state
    values longer than the cut, every metric, a stop at the token limit."""
    inputs = sorted((render_messages(with_system(row["prompt"], seed_text, env.message_type)) for row in train),
                    key=len, reverse=True)[:minibatch_size]
    long = FILLER * (SHORTEST_CHARS[-1] // len(FILLER) + 2)
    return [{"input": text, "completion": f"[assistant] {long}", "answer": long, "reward": 0.0,
             "metrics": dict.fromkeys(metric_names, 0.0), "error": None, "metrics_errors": [],
             "stop_condition": "max_turns_reached", "is_truncated": True,
             **({"state": dict.fromkeys(state_columns, long)} if state_columns else {})} for text in inputs]


def check_fits(window: ContextWindow, config: Any, env: Any, seed_text: str, train: Sequence[dict[str, Any]],
               metric_names: list[str]) -> None:
    """Refuse a run (EnvConfigError: one line, exit 2) whose shortest reflection prompt cannot fit the
    reflection model's context beside its max_tokens: the seed prompt with one cut rollout of each
    minibatch row, as a reflection and as an edit step."""
    room = window.room
    if room is None:
        return
    records = shortest_records(env, seed_text, train, config.minibatch_size, metric_names, config.state_columns)
    chars = SHORTEST_CHARS[-1]
    texts = [reflection_prompt(seed_text, records, metric_names, chars),
             edit_prompt(seed_text, [Instruction(line, None) for line in instruction_lines(seed_text)], {}, records,
                         metric_names, chars)]
    need = max(window.tokens(text) for text in texts)
    if need <= room:
        return
    rows = len(records)
    prompt_tokens = window.tokens(seed_text) - TEMPLATE_TOKENS
    raise EnvConfigError(
        f"the reflection model {window.described()}, too few for this run: even its shortest reflection prompt "
        f"(the seed prompt, about {prompt_tokens} tokens, with one rollout of each of the {rows} minibatch rows "
        f"cut to {chars} characters a field) needs about {need}, beside the {window.max_tokens} of the reply's "
        f"max_tokens; use -M with a model of a longer context, a smaller --minibatch-size, or a smaller "
        f"max_tokens in --reflection-sampling-args")
