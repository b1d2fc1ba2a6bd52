"""Reflective mutation: show the reflection model a minibatch with feedback, take its new prompt.

A record carries everything a rollout tells about the prompt: the input, the completion, the
expected answer, the reward, every metric, errors, the stop condition and the requested state
columns. The new prompt is the reply's last fenced block; a reply cut by the token limit, or one
whose block is never closed, is rejected rather than adopted half-written.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from prime_cli.envs.messages import content_text
from prime_cli.results.summary import error_kind

MAX_FIELD_CHARS = 4000

TEMPLATE = """You are improving the system prompt of a language-model assistant.

The current system prompt:
```
{prompt}
```

Below are {count} task(s) the assistant attempted with that prompt. Each shows the input, the
assistant's output, the expected answer, the reward (higher is better), every metric the
environment measured, errors and why the attempt stopped. An attempt that ended in an error has no
reward: read its error as feedback.{metrics_note}

{examples}

Work out what the assistant got wrong and what the task really asks for (formats, rules, facts
it could not know), and write an improved system prompt that keeps what already works.
Reply with the complete new system prompt inside one ``` fenced block."""


@dataclass
class Proposal:
    prompt: str | None
    reason: str  # why there is no prompt ("reflection truncated", ...), or "proposed"
    raw: str = ""
    truncated: bool = False  # the reply hit the token limit (a block closed before it still counts)


def _clip(text: str) -> str:
    return text if len(text) <= MAX_FIELD_CHARS else text[:MAX_FIELD_CHARS] + f" …[{len(text) - MAX_FIELD_CHARS} more chars]"


_MESSAGE_START = re.compile(r"\n(?=\[(?:system|user|assistant|tool)\] )")
MIN_MESSAGE_CHARS = 80


def cut(text: str, chars: int | None) -> str:
    """`text` in at most about `chars` characters: its start and its end, the middle cut and counted
    (None: as it is)."""
    if chars is None or len(text) <= chars:
        return text
    head, tail = text[: chars * 2 // 3], text[len(text) - chars // 3:]
    return f"{head} …[{len(text) - len(head) - len(tail)} chars cut]… {tail}"


def cut_transcript(text: str, chars: int | None, prompt: str | None = None) -> str:
    """A rendered message list in about `chars` characters: each message cut to its share (a long tool
    output loses its middle, the turns around it stay), then the whole. The system message that is the
    current prompt (shown above it) is named, not repeated."""
    if chars is None:
        return text
    parts = _MESSAGE_START.split(text)
    if prompt and parts and parts[0] == f"[system] {prompt}":
        parts[0] = "[system] (the current system prompt, shown above)"
    share = max(chars // max(len(parts), 1), MIN_MESSAGE_CHARS)
    return cut("\n".join(cut(part, share) for part in parts), chars)


def render_messages(messages: Any) -> str:
    if isinstance(messages, str):
        return messages
    parts = []
    for message in messages or []:
        text = content_text(message)
        calls = message.get("tool_calls")
        if calls:
            text += " " + json.dumps([c.get("function", c) for c in calls], ensure_ascii=False)
        parts.append(f"[{message.get('role', '?')}] {text}".rstrip())
    return "\n".join(parts)


def rollout_record(state: dict[str, Any], state_columns: list[str]) -> dict[str, Any]:
    """What a reflection needs from one scored rollout (JSON-friendly, long fields clipped)."""
    record = {
        "input": _clip(render_messages(state.get("prompt"))),
        "completion": _clip(render_messages(state.get("completion"))),
        "answer": _clip(str(state.get("answer") or "")),
        # an errored rollout has no reward (never 0): its error is the feedback
        "reward": None if error_kind(state.get("error")) else float(state.get("reward") or 0.0),
        "metrics": {k: float(v) for k, v in (state.get("metrics") or {}).items() if isinstance(v, int | float)},
        "error": state.get("error"),
        "metrics_errors": list(state.get("metrics_errors") or []),
        "stop_condition": state.get("stop_condition"),
        "is_truncated": bool(state.get("is_truncated")),
    }
    extra = {c: state.get(c) for c in state_columns if c in state}
    if extra:
        record["state"] = json.loads(json.dumps(extra, default=str, ensure_ascii=False))
    return record


def _reward_line(record: dict[str, Any]) -> str:
    reward = record.get("reward")
    if reward is None:  # the attempt errored: not a failure of the prompt, so no reward is shown
        return "### Reward: none (the attempt ended in the error below; it is not scored)"
    return f"### Reward: {reward:.4g}"


def render_record(number: int, record: dict[str, Any], chars: int | None = None, prompt: str | None = None) -> str:
    """One example as the reflection reads it; `chars` (None: as recorded) cuts each long field to about
    that many characters, to fit the reflection model's context (fitting.py); `prompt`: the current one."""
    lines = [f"## Example {number}", "### Input", cut_transcript(record["input"], chars, prompt), "### Output",
             cut_transcript(record["completion"], chars) or "(empty)",
             "### Expected answer", cut(record["answer"], chars) or "(none given)", _reward_line(record)]
    if record["metrics"]:
        lines.append("### Metrics: " + ", ".join(f"{k}={v:.4g}" for k, v in record["metrics"].items()))
    if record.get("error"):
        error = record["error"]
        text = f"{error.get('type', '')}: {error.get('message', '')}" if isinstance(error, dict) else str(error)
        lines.append(f"### Error: {cut(text, chars)}")
    for item in record.get("metrics_errors") or []:
        if isinstance(item, dict):
            text = f"{item.get('type', '')}: {item.get('message', '')}"
            lines.append(f"### Metric {item.get('func', '?')} failed: {cut(text, chars)}")
    stop = record.get("stop_condition") or "completed"
    lines.append(f"### Stopped by: {stop}" + (" (output cut at the token limit)" if record.get("is_truncated") else ""))
    if record.get("state"):
        for key, value in record["state"].items():
            lines.append(f"### {key}\n{cut(_clip(json.dumps(value, ensure_ascii=False)), chars)}")
    return "\n".join(lines)


def reflection_prompt(current: str, records: list[dict[str, Any]], metric_names: list[str],
                      chars: int | None = None) -> str:
    note = f"\nMetrics measured: {', '.join(metric_names)}." if metric_names else ""
    examples = "\n\n".join(render_record(i + 1, r, chars, current) for i, r in enumerate(records))
    return TEMPLATE.format(prompt=current or "(empty)", count=len(records), metrics_note=note, examples=examples)


def parse_reply(text: str | None, finish_reason: str | None) -> Proposal:
    """The new prompt from a reflection reply: the last closed fenced block. A reply cut at the token
    limit keeps a block closed before the cut (small models close the prompt, then ramble on)."""
    raw = text or ""
    truncated = finish_reason == "length"
    blocks: list[str] = []
    current: list[str] | None = None
    for line in raw.splitlines():
        if line.strip().startswith("```"):
            if current is None:
                current = []
                continue
            if line.strip() == "```":
                blocks.append("\n".join(current))
                current = None
                continue
        if current is not None:
            current.append(line)
    if truncated and not blocks:
        return Proposal(None, "reflection truncated", raw, truncated)
    if current is not None and not truncated:
        return Proposal(None, "reflection has an unclosed ``` block", raw)
    if not blocks:
        return Proposal(None, "reflection has no ``` block", raw)
    prompt = blocks[-1].strip()
    if not prompt:
        return Proposal(None, "reflection proposed an empty prompt", raw, truncated)
    return Proposal(prompt, "proposed", raw, truncated)
