"""`prime eval run -v`: each finished rollout as a short block to read by eye, or as a JSON event.

A block is one header line (example id, rollout index, reward, each metric, the stop condition)
followed by the tail of the prompt (its last user message) and the completion's messages, each
cut to a few hundred characters: the start and the end of a text are kept, since the end usually
holds the answer. A long multi-turn completion shows its first and last messages. The full texts
stay in results.jsonl.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from prime_cli.envs.messages import content_text, messages_of
from prime_cli.runs.visible import visible

PROMPT_CHARS = 160
MESSAGE_CHARS = 300
HEAD_MESSAGES, TAIL_MESSAGES = 2, 4  # of a completion with more messages than these two add up to


def shorten(text: str, limit: int) -> str:
    """`text` on one line (whitespace runs become one space), its middle cut to fit in `limit`."""
    flat = " ".join(str(text).split())
    if len(flat) <= limit:
        return flat
    head = max(limit // 3, 1)
    tail = max(limit - head - 3, 1)
    return f"{flat[:head]} … {flat[-tail:]}"


def _number(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "-" if value is None else str(value)
    return f"{value:.3f}" if math.isfinite(value) else str(value)


def _tool_call(call: Any) -> str:
    function = call.get("function") if isinstance(call, dict) and isinstance(call.get("function"), dict) else {}
    name = str(function.get("name") or "?")
    args = function.get("arguments", "")
    if not isinstance(args, str):
        args = json.dumps(args, ensure_ascii=False)
    return f"{name}({args})"




def _prompt_tail(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    for message in reversed(messages_of(prompt)):
        if message.get("role") == "user":
            return content_text(message)
    messages = messages_of(prompt)
    return content_text(messages[-1]) if messages else ""


def _entry(message: dict[str, Any], tool_names: dict[str, str]) -> tuple[str, str]:
    """(role label, shortened text) of one completion message, tool calls written as name(args)."""
    role = str(message.get("role") or "?")
    if role == "tool":
        name = message.get("name") or tool_names.get(str(message.get("tool_call_id")))
        role = f"tool {name}" if name else role
    parts = [content_text(message)] if message.get("content") else []
    parts += [f"→ {_tool_call(call)}" for call in message.get("tool_calls") or []]
    return visible(role), shorten(visible(" ".join(parts), multiline=True), MESSAGE_CHARS) if parts else "(empty)"


def _tool_names(messages: list[dict[str, Any]]) -> dict[str, str]:
    """Tool call id -> function name, to label the tool messages that answer them."""
    names = {}
    for message in messages:
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict) and isinstance(call.get("function"), dict):
                names[str(call.get("id"))] = str(call["function"].get("name") or "?")
    return names


def _error_text(error: Any) -> str | None:
    if not error:
        return None
    if isinstance(error, dict):
        error = f"{error.get('type') or 'Error'}: {error.get('message') or ''}".rstrip(": ")
    return shorten(visible(error, multiline=True), MESSAGE_CHARS)


@dataclass
class RolloutView:
    example_id: Any
    rollout_idx: Any
    task: str | None
    reward: Any
    metrics: dict[str, Any]
    stop_condition: str | None
    is_truncated: bool
    error: str | None
    failed_reward_funcs: list[str]
    prompt_tail: str
    completion: list[tuple[str, str]]  # (role label, shortened text); ("…", "N more messages") for a gap
    hidden_messages: int = 0

    def header(self) -> str:
        task = f" [{self.task}]" if self.task not in (None, "", "default") else ""
        parts = [f"example {self.example_id} rollout {self.rollout_idx}{task}:", f"reward {_number(self.reward)}"]
        parts += [f"{name}={_number(value)}" for name, value in self.metrics.items()]
        if self.stop_condition:
            parts.append(f"stop={self.stop_condition}")
        if self.is_truncated:
            parts.append("truncated")
        return visible("  ".join(parts))  # an example id from the data set may hold anything

    def notes(self) -> list[tuple[str, str]]:
        """(label, text) lines after the messages: the error and failed reward functions."""
        lines = []
        if self.error:
            lines.append(("error", self.error))
        if self.failed_reward_funcs:
            lines.append(("reward-fn errors", ", ".join(self.failed_reward_funcs)))
        return lines


def rollout_view(row: dict[str, Any], env_id: str = "") -> RolloutView:
    """The view of one results.jsonl row; its task is shown unless it is just the environment's id."""
    messages = messages_of(row.get("completion"))
    names = _tool_names(messages)
    shown = [_entry(m, names) for m in messages] or [("completion", "(none)")]
    hidden = 0
    if len(shown) > HEAD_MESSAGES + TAIL_MESSAGES + 1:  # a gap line must hide at least two
        hidden = len(shown) - HEAD_MESSAGES - TAIL_MESSAGES
        shown = [*shown[:HEAD_MESSAGES], ("…", f"{hidden} more messages"), *shown[-TAIL_MESSAGES:]]
    failed = [str(e.get("func") or "?") if isinstance(e, dict) else str(e) for e in row.get("metrics_errors") or []]
    metrics = row.get("metrics") if isinstance(row.get("metrics"), dict) else {}
    task = row.get("task")
    stop = row.get("stop_condition")
    # every text below came from the data set, the model or the environment: control characters escaped
    # (before shortening, so that a lone CR shows as \r rather than as a space)
    return RolloutView(
        example_id=row.get("example_id"), rollout_idx=row.get("rollout_idx"),
        task=None if task is None or str(task) == env_id else visible(task), reward=row.get("reward"),
        metrics={visible(name): value for name, value in metrics.items()},
        stop_condition=None if stop is None else visible(stop), is_truncated=bool(row.get("is_truncated")),
        error=_error_text(row.get("error")), failed_reward_funcs=[visible(name) for name in failed],
        prompt_tail=shorten(visible(_prompt_tail(row.get("prompt")), multiline=True), PROMPT_CHARS),
        completion=shown, hidden_messages=hidden,
    )


def rollout_text(view: RolloutView) -> str:
    """The block as plain lines (no ANSI codes)."""
    lines = [view.header(), f"  prompt: {view.prompt_tail}"]
    lines += [f"  {role}: {text}" for role, text in view.completion]
    lines += [f"  {label}: {text}" for label, text in view.notes()]
    return "\n".join(lines)


def rollout_event(view: RolloutView) -> dict[str, Any]:
    """The fields of a `rollout` NDJSON event (texts shortened as on the console)."""
    return {
        "example_id": view.example_id, "rollout_idx": view.rollout_idx, "task": view.task,
        "reward": view.reward, "metrics": view.metrics, "stop_condition": view.stop_condition,
        "is_truncated": view.is_truncated, "error": view.error, "reward_fn_errors": view.failed_reward_funcs,
        "prompt_tail": view.prompt_tail,
        "completion": [{"role": role, "text": text} for role, text in view.completion if role != "…"],
        "hidden_messages": view.hidden_messages,
    }


def rollout_renderable(view: RolloutView) -> Any:
    """The block for a rich console: a bold header line, then a grid of role labels and texts."""
    from rich.console import Group  # lazy: heavy
    from rich.table import Table  # lazy: heavy
    from rich.text import Text  # lazy: heavy

    header = Text(view.header(), style="bold")
    if view.error:
        header.stylize("red")
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row("  prompt", Text(view.prompt_tail, style="cyan"))
    for role, text in view.completion:
        grid.add_row(f"  {role}", Text(text, style="dim" if role == "…" else ""))
    for label, text in view.notes():
        grid.add_row(Text(f"  {label}", style="red"), Text(text, style="red"))
    return Group(header, grid)
