"""`--set KEY=VALUE`: set one key of the config dict (`trainer.optim.lr=3e-4`, `orchestrator.env[0].ratio=2`).

The value is read as a TOML value when it parses as one (numbers, booleans, strings in quotes, arrays,
inline tables); anything else is taken as a plain string (`--set model.name=Qwen/Qwen3-0.6B`).
"""

from __future__ import annotations

import re
from typing import Any

from .errors import TrainConfigError
from .tomlio import toml_loads

_SEGMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*)((?:\[\d+\])*)$")


def parse_override(text: str) -> tuple[str, Any]:
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise TrainConfigError(f"--set expects KEY=VALUE (got {text!r})")
    return key, parse_value(raw.strip())


def parse_value(raw: str) -> Any:
    try:
        return toml_loads(f"value = {raw}")["value"]
    except Exception:
        return raw


def parse_key(key: str) -> list[str | int]:
    """`orchestrator.env[0].args.n` -> ["orchestrator", "env", 0, "args", "n"]."""
    parts: list[str | int] = []
    for segment in key.split("."):
        match = _SEGMENT.match(segment)
        if match is None:
            raise TrainConfigError(f"--set key {key!r} is not a dotted key like trainer.optim.lr or orchestrator.env[0].id")
        parts.append(match.group(1))
        parts.extend(int(i) for i in re.findall(r"\[(\d+)\]", match.group(2)))
    return parts


def format_path(parts: list[str | int] | tuple[Any, ...]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def set_path(data: dict[str, Any], key: str, value: Any) -> None:
    parts = parse_key(key)
    node: Any = data
    for depth, part in enumerate(parts[:-1]):
        here = format_path(parts[: depth + 1])
        nxt = parts[depth + 1]
        if isinstance(part, int):
            if part >= len(node):
                raise TrainConfigError(f"--set {key}: {format_path(parts[:depth])} has {len(node)} entries "
                                       f"(indexes 0..{len(node) - 1})")
            child = node[part]
        else:
            child = node.get(part)
            if child is None:
                child = [] if isinstance(nxt, int) else {}
                node[part] = child
        if isinstance(nxt, int) and not isinstance(child, list):
            raise TrainConfigError(f"--set {key}: {here} is not a list")
        if isinstance(nxt, str) and not isinstance(child, dict):
            raise TrainConfigError(f"--set {key}: {here} is a value, not a table")
        node = child
    last = parts[-1]
    if isinstance(last, int):
        if last > len(node):
            raise TrainConfigError(f"--set {key}: {format_path(parts[:-1])} has {len(node)} entries; "
                                   f"the next one is [{len(node)}]")
        if last == len(node):
            node.append(value)
        else:
            node[last] = value
    else:
        node[last] = value


def apply_overrides(data: dict[str, Any], overrides: list[str], translate=lambda key: key) -> set[str]:
    """Applies each `KEY=VALUE` in order; returns the (dotted) keys that were set."""
    keys: set[str] = set()
    for text in overrides:
        key, value = parse_override(text)
        key = translate(key)
        set_path(data, key, value)
        keys.add(format_path(parse_key(key)))
    return keys
