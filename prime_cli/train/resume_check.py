"""May a run resume from its checkpoint with a new config? The checkpoint must be whole, and the saved
config.json may differ from the new one only where the checkpoint can take it.

A change that makes the checkpoint unusable (another model, another LoRA shape) is refused, naming the
key; any other change (max_steps, learning rate, eval settings, ...) is allowed and listed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prime_cli.runs.checkpoint_check import checkpoint_problem, last_good_checkpoint
from prime_cli.runs.layouts import TrainingRunLayout

# keys whose change makes the checkpoint's adapter and optimizer state unusable
CHECKPOINT_SHAPE_KEYS = ("model.name", "trainer.model.lora.rank", "trainer.model.lora.alpha",
                         "trainer.model.lora.target_modules")
IGNORED_KEYS = ("output_dir",)  # the same folder may be named relatively or absolutely
UNORDERED_KEYS = ("trainer.model.lora.target_modules",)  # a set written as a list


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


def _same(key: str, old: Any, new: Any) -> bool:
    if key in UNORDERED_KEYS and isinstance(old, list) and isinstance(new, list):
        return sorted(map(str, old)) == sorted(map(str, new))
    return old == new


def config_changes(saved: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(key, saved value, new value) for every leaf that differs."""
    old_flat, new_flat = _flatten(saved), _flatten(new)
    changes = []
    for key in sorted(set(old_flat) | set(new_flat)):
        if key in IGNORED_KEYS:
            continue
        if not _same(key, old_flat.get(key), new_flat.get(key)):
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


def _saved_config(layout: TrainingRunLayout, model: type) -> dict[str, Any]:
    """config.json as the current config model reads it (defaults of newer keys filled in)."""
    try:
        saved = json.loads(layout.config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ResumeConfigError(f"{layout.config_path} cannot be read ({exc}): this folder's run cannot be checked "
                                "for a resume; start a new run with -o DIR") from None
    try:
        return model.model_validate(saved).model_dump(mode="json")
    except ValueError:
        return saved


def check_resume(layout: TrainingRunLayout, config: Any, step: int) -> list[str]:
    """Raise ResumeConfigError (one line) unless the run in `layout` can resume at `step` with `config`: a
    whole checkpoint, a config it can take. Returns the notes on the allowed config changes. Reads only."""
    available = layout.checkpoint_steps()
    if step not in available:
        listed = ", ".join(map(str, available)) or "none"
        hint = ""
        if not layout.config_path.exists() and TrainingRunLayout(Path("outputs")).config_path.exists():
            hint = ("; a run started before output_dir defaulted to outputs/rl/<env id> is in ./outputs: "
                    "add -o outputs to resume it")
        raise ResumeConfigError(f"no checkpoint for step {step} in {layout.output_dir / layout.CHECKPOINTS} "
                                f"(available: {listed}){hint}")
    if problem := checkpoint_problem(layout, step):
        good = last_good_checkpoint(layout, below=step)
        way = (f"resume from the last whole one with --resume-step {good}" if good is not None
               else "no earlier checkpoint is whole: start a new run with -o DIR")
        raise ResumeConfigError(f"the checkpoint of step {step} is damaged: {problem}; {way}")
    try:
        return check_resume_config(_saved_config(layout, type(config)), config.model_dump(mode="json"), step)
    except ResumeConfigError as exc:
        raise ResumeConfigError(f"cannot resume {layout.output_dir} at step {step}: {exc}") from None
