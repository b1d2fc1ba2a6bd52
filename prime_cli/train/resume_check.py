"""May a run resume from its checkpoint with a new config? The saved config.json against the new one.

A change that makes the checkpoint unusable (another model, another LoRA shape) is refused, naming the
key; any other change (max_steps, learning rate, eval settings, ...) is allowed and listed.
"""

from __future__ import annotations

from typing import Any

# keys whose change makes the checkpoint's adapter and optimizer state unusable
CHECKPOINT_SHAPE_KEYS = ("model.name", "trainer.model.lora.rank", "trainer.model.lora.alpha",
                         "trainer.model.lora.target_modules")
IGNORED_KEYS = ("output_dir",)  # the same folder may be named relatively or absolutely


class ResumeConfigError(Exception):
    pass


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(data, dict):
        return {prefix: data}
    flat: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict) and value:
            flat.update(_flatten(value, path))
        else:
            flat[path] = value
    return flat


def _show(value: Any) -> str:
    return "(unset)" if value is None else repr(value)


def config_changes(saved: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(key, saved value, new value) for every leaf that differs."""
    old_flat, new_flat = _flatten(saved), _flatten(new)
    changes = []
    for key in sorted(set(old_flat) | set(new_flat)):
        if key in IGNORED_KEYS:
            continue
        if old_flat.get(key) != new_flat.get(key):
            changes.append((key, old_flat.get(key), new_flat.get(key)))
    return changes


def check_resume_config(saved: dict[str, Any], new: dict[str, Any], step: int) -> list[str]:
    """Raise ResumeConfigError for a change the checkpoint cannot take; else the notes on the allowed ones."""
    changes = config_changes(saved, new)
    for key, old, value in changes:
        if key in CHECKPOINT_SHAPE_KEYS or any(key.startswith(k + ".") for k in CHECKPOINT_SHAPE_KEYS):
            raise ResumeConfigError(
                f"{key} changed ({_show(old)} -> {_show(value)}): the checkpoint of step {step} was trained with "
                f"{_show(old)} and cannot be loaded with another; set it back to {_show(old)} to resume, or start "
                "a new run in another folder with -o DIR")
    max_steps = new.get("max_steps")
    if isinstance(max_steps, int) and max_steps <= step:
        raise ResumeConfigError(f"max_steps ({max_steps}) must be above the step resumed from ({step}): raise it "
                                f"(e.g. --set max_steps={step + 10}) to train more")
    return [f"note: resuming with {key} changed: {_show(old)} -> {_show(value)}" for key, old, value in changes]
