"""The short hosted config shape, mapped onto the prime-rl (v0.4) shape that `RLConfig` reads.

    model = "Qwen/Qwen3-0.6B"
    max_steps = 50
    batch_size = 64
    rollouts_per_example = 8
    learning_rate = 1e-5          # or lr
    lora_rank = 16
    [sampling]
    max_tokens = 256
    [[env]]
    id = "reverse-text"

Keys it does not know (max_steps, seq_len, output_dir, [trainer], [inference], ...) are kept as they
are, so a hosted file may still set any v0.4 key; unknown ones are reported by validation.
"""

from __future__ import annotations

from typing import Any

from .errors import TrainConfigError

# hosted key -> v0.4 key path
HOSTED_KEYS: dict[str, tuple[str, ...]] = {
    "batch_size": ("orchestrator", "batch_size"),
    "rollouts_per_example": ("orchestrator", "rollouts_per_example"),
    "oversampling_factor": ("orchestrator", "oversampling_factor"),
    "max_async_level": ("orchestrator", "max_async_level"),
    "max_concurrent": ("orchestrator", "max_concurrent"),
    "sampling": ("orchestrator", "sampling"),
    "buffer": ("orchestrator", "buffer"),
    "env": ("orchestrator", "env"),
    "learning_rate": ("trainer", "optim", "lr"),
    "lr": ("trainer", "optim", "lr"),
    "lora_rank": ("trainer", "model", "lora", "rank"),
    "lora_alpha": ("trainer", "model", "lora", "alpha"),
}
HOSTED_ONLY = set(HOSTED_KEYS) - {"max_async_level", "max_concurrent", "oversampling_factor"}


def is_hosted(data: dict[str, Any]) -> bool:
    """The v0.4 shape has an [orchestrator] table; the hosted one has `model = "..."` or its own keys."""
    if "orchestrator" in data:
        return False
    return isinstance(data.get("model"), str) or any(key in data for key in HOSTED_ONLY)


def _put(target: dict[str, Any], path: tuple[str, ...], value: Any, key: str, taken: dict[tuple[str, ...], str]) -> None:
    node = target
    for part in path[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise TrainConfigError(f"{key} maps to {'.'.join(path)}, but {part} is not a table in this file")
        node = child
    if path[-1] in node:
        other = taken.get(path, ".".join(path))
        raise TrainConfigError(f"{key} and {other} set the same value ({'.'.join(path)}): keep one of them")
    node[path[-1]] = value
    taken[path] = key


def from_hosted(data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """Returns the v0.4-shaped dict and the renames used ({v0.4 path: hosted key}) for error messages."""
    out: dict[str, Any] = {}
    taken: dict[tuple[str, ...], str] = {}
    renames = {".".join(path): key for key, path in HOSTED_KEYS.items() if key != "lr"}
    renames["model.name"] = "model"
    for key, value in data.items():  # the plain keys first, so a mapped key that collides names both
        if key not in HOSTED_KEYS and not (key == "model" and isinstance(value, str)):
            out[key] = value
    for key, value in data.items():
        if key == "model" and isinstance(value, str):
            _put(out, ("model", "name"), value, key, taken)
        elif key in HOSTED_KEYS:
            _put(out, HOSTED_KEYS[key], value, key, taken)
            renames[".".join(HOSTED_KEYS[key])] = key
    return out, renames


def translate_override_key(key: str) -> str:
    """`--set batch_size=16` on a hosted file means `orchestrator.batch_size`."""
    head, sep, rest = key.partition(".")
    name, bracket, index = head.partition("[")
    if name in HOSTED_KEYS:
        return ".".join(HOSTED_KEYS[name]) + bracket + index + sep + rest
    if name == "model" and not sep:
        return "model.name"
    return key
