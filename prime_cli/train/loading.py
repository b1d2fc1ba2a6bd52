"""Read a training config (prime-rl v0.4 shape or the short hosted shape), apply `--set`, validate.

Every problem becomes a `TrainConfigError` whose message is one line naming the key and the fix.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import TrainConfigError
from .hosted import HOSTED_KEYS, from_hosted, is_hosted, translate_override_key
from .messages import describe_validation_error, rename_paths
from .overrides import apply_overrides, format_path
from .tomlio import TOMLDecodeError, toml_loads

if TYPE_CHECKING:
    from .config import RLConfig


def read_toml(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise TrainConfigError(f"{path}: no such config file (examples: configs/rl/*.toml)")
    if not path.is_file():
        raise TrainConfigError(f"{path} is not a file; give a TOML config such as configs/rl/reverse-text-cpu.toml")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TrainConfigError(f"{path}: cannot read it ({exc})") from None
    if path.suffix == ".json":  # the resolved config.json a run writes: `prime train OUT/config.json --resume-step N`
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise TrainConfigError(f"{path} is not valid JSON: {exc}") from None
    try:
        return toml_loads(text)
    except TOMLDecodeError as exc:
        raise TrainConfigError(f"{path} is not valid TOML: {str(exc).splitlines()[0]}") from None


def config_dict(path: Path, overrides: list[str] = ()) -> tuple[dict[str, Any], dict[str, str], set[str]]:
    """The v0.4-shaped dict with overrides applied, the hosted renames, and the overridden keys."""
    data = read_toml(path)
    renames: dict[str, str] = {}
    hosted = is_hosted(data)
    if hosted:
        data, renames = from_hosted(data)
    keys = apply_overrides(data, list(overrides), translate_override_key if hosted else str)
    return data, renames, keys


def validate_config(data: dict[str, Any], model: type | None = None, source: str = "the config",
                    renames: dict[str, str] | None = None, overridden: set[str] = frozenset()) -> Any:
    """`model.model_validate(data)`, with a validation error turned into one `TrainConfigError` line."""
    from pydantic import ValidationError

    if model is None:
        from .config import RLConfig as model
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0] if exc.errors() else {}
        where = source
        if first.get("type") == "extra_forbidden" and format_path(tuple(first.get("loc", ()))) in overridden:
            where = "--set"
        extra = sorted(HOSTED_KEYS) + ["model"] if renames else []
        message = describe_validation_error(exc, model, where, extra)
        raise TrainConfigError(rename_paths(message, renames or {})) from None


def load_train_config(path: Path, overrides: list[str] = (), output_dir: str | None = None) -> RLConfig:
    """Read, map, override and validate a config file into an `RLConfig`."""
    path = Path(path)
    data, renames, keys = config_dict(path, overrides)
    if output_dir is not None:
        data["output_dir"] = str(output_dir)
    return validate_config(data, None, str(path), renames, keys)


def check_environments(config: RLConfig) -> None:
    """Each `orchestrator.env[i]` loads with its args (the orchestrator would fail later otherwise)."""
    import prime_cli.envs as vf

    for index, entry in enumerate(config.orchestrator.env):
        try:
            vf.load_environment(entry.id, **entry.args)
        except Exception as exc:  # an environment's own code may raise anything
            lines = str(exc).strip().splitlines()
            reason = lines[0] if lines else type(exc).__name__
            if not isinstance(exc, vf.EnvConfigError):
                reason = f"{type(exc).__name__}: {reason}"
            raise TrainConfigError(f"orchestrator.env[{index}].id: cannot load environment {entry.id!r} ({reason})") from None
