"""Read a training config (prime-rl v0.4, hosted or simplified prime-rl shape), apply `--set`, validate.

Every problem becomes a `TrainConfigError` whose message is one line naming the key and the fix.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prime_cli.runs.config_loading import parse_toml, read_config_text
from prime_cli.runs.visible import visible

from .config_aliases import (
    alias_names,
    derive_defaults,
    hoist_top_level_keys,
    normalize,
    translate_override_key,
)
from .env_file import resolve_env_files
from .errors import TrainConfigError
from .messages import describe_validation_error, rename_paths
from .overrides import apply_overrides, format_path

if TYPE_CHECKING:
    from .config import RLConfig


def read_toml(path: Path) -> dict[str, Any]:
    text = read_config_text(path, "configs/rl/*.toml", TrainConfigError)
    if path.suffix == ".json":  # the resolved config.json a run writes: `prime train OUT/config.json --resume-step N`
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise TrainConfigError(f"{path} is not valid JSON: {exc}") from None
    return parse_toml(text, path, TrainConfigError)


def config_dict(path: Path, overrides: list[str] = ()
                ) -> tuple[dict[str, Any], dict[str, str], set[str], list[str]]:
    """The v0.4-shaped dict with overrides applied, the hosted renames, the overridden keys, and notes on
    what was read other than as written (a top-level key after a table header, the GPUs num_gpus places)."""
    from .config import RLConfig  # lazy: heavy

    data, renames = normalize(read_toml(path))
    notes = hoist_top_level_keys(data, renames, RLConfig)
    if notes:  # a hoisted guide spelling (batch_size) lands on its key
        data, again = normalize(data)
        renames = {**renames, **again}
    keys = apply_overrides(data, list(overrides), translate_override_key)
    data, more = normalize(data)  # a key --set under its guide name inside a table (env[0].weight)
    renames = {**renames, **more}
    notes += derive_defaults(data, renames)
    if data.get("env_file"):
        data["env_file"] = resolve_env_files(data["env_file"], path.parent)
    return data, renames, keys, notes


def validate_config(data: dict[str, Any], model: type | None = None, source: str = "the config",
                    renames: dict[str, str] | None = None, overridden: set[str] = frozenset()) -> Any:
    """`model.model_validate(data)`, with a validation error turned into one `TrainConfigError` line."""
    from pydantic import ValidationError  # lazy: heavy

    if model is None:
        from .config import RLConfig as model  # lazy: heavy
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0] if exc.errors() else {}
        where = source
        path = format_path(tuple(first.get("loc", ())))
        from_set = path in overridden
        if first.get("type") == "extra_forbidden" and from_set:
            where = "--set"
            from_set = False  # "unknown key K in --set" says it already
        extra = alias_names()
        message = describe_validation_error(exc, model, where, extra)
        if from_set:  # the value came from the flag: say so, as typed (`--set max_steps must be ...`)
            message = f"--set {message}" if message.startswith(path) else f"--set {path}: {message}"
        raise TrainConfigError(rename_paths(message, renames or {})) from None


def load_train_config(path: Path, overrides: list[str] = (), output_dir: str | None = None) -> RLConfig:
    """Read, map, override and validate a config file into an `RLConfig`."""
    return load_train_config_with_notes(path, overrides, output_dir)[0]


def load_train_config_with_notes(path: Path, overrides: list[str] = (), output_dir: str | None = None
                                 ) -> tuple[RLConfig, list[str]]:
    """`load_train_config`, and the `note:` lines on keys read other than as written (shown by --dry-run
    and at the start of a run)."""
    path = Path(path)
    data, renames, keys, notes = config_dict(path, overrides)
    if output_dir is not None:
        data["output_dir"] = str(output_dir)
    return absolute_paths(validate_config(data, None, str(path), renames, keys)), notes


def absolute_paths(config: RLConfig) -> RLConfig:
    """The adapters and data files a config names, made absolute when they exist: the parts and a resume from
    OUT/config.json read them from wherever they run."""
    def resolved(value: str | None) -> str | None:
        return str(Path(value).expanduser().resolve()) if value and Path(value).expanduser().exists() else value

    config.model.adapter = resolved(config.model.adapter)
    orch = config.orchestrator
    for teacher in (orch.teacher_model, orch.teacher_rollout_model):
        if teacher is not None:
            teacher.adapter = resolved(teacher.adapter)
    for source in orch.algo.dataset.source if orch.algo.dataset is not None else []:
        source.dataset = resolved(source.dataset)
    return config


def check_environments(config: RLConfig, dry_run: bool = False) -> list[str]:
    """Each `orchestrator.env[i]` (and `orchestrator.eval.env[i]`) loads with its args (the orchestrator
    would fail later otherwise). A dry run (maybe of a config meant for another machine) returns a model
    client the environment cannot make here (a judge's key not set) as a note, where a real run refuses it."""
    import prime_cli.envs as vf  # lazy: already loaded
    from prime_cli.clients.errors import ClientConfigError  # lazy: start-up
    from prime_cli.envs.errors import EnvironmentNotInstalledError  # lazy: already loaded
    from prime_cli.envs.load_errors import EnvironmentCodeError  # lazy: already loaded
    from prime_cli.envs.loader import malformed_id  # lazy: already loaded

    from .preflight import client_note, train_spelling  # lazy: start-up

    entries = [("orchestrator.env", index, entry) for index, entry in enumerate(config.orchestrator.env)]
    if config.orchestrator.eval is not None:
        entries += [("orchestrator.eval.env", index, entry) for index, entry in enumerate(config.orchestrator.eval.env)]
    notes = []
    for where, index, entry in entries:
        if problem := malformed_id(entry.id):
            raise TrainConfigError(f"{where}[{index}].id: {problem}")
        try:
            vf.load_environment(entry.id, **entry.args)
        except EnvironmentNotInstalledError as exc:  # its message is the command that installs it
            raise TrainConfigError(f"{where}[{index}].id: {exc}") from None
        except ClientConfigError as exc:  # a judge or teacher client of the environment: this machine's keys
            reason = visible((str(exc).strip().splitlines() or [type(exc).__name__])[0])
            if not dry_run:
                raise TrainConfigError(f"{where}[{index}].id: cannot load environment {entry.id!r} ({reason})") from None
            notes.append(client_note(f"{where}[{index}]", entry.id, reason))
        except Exception as exc:  # an environment's own code may raise anything
            lines = str(exc).strip().splitlines()
            reason = lines[0] if lines else type(exc).__name__
            if isinstance(exc, EnvironmentCodeError):  # the environment's code: its error, without the id again
                reason = exc.short + exc.where
            elif not isinstance(exc, vf.UserInputError):
                reason = f"{type(exc).__name__}: {reason}"
            raise TrainConfigError(f"{where}[{index}].id: cannot load environment {entry.id!r} "
                                   f"({visible(train_spelling(reason, f'{where}[{index}]'))})") from exc
    return notes


def config_notes(config: RLConfig) -> list[str]:
    """Settings that are valid but may not do what their author expects (shown by --dry-run and at start)."""
    notes = []
    orch = config.orchestrator
    if orch.from_data:
        # values, not model_fields_set: the config reaches here re-validated from a full dump, every key "set"
        unused = [f"orchestrator.{key}" for key in ("env", "rollouts_per_example", "sampling", "buffer",
                                                    "oversampling_factor", "trajectory_strategy")
                  if getattr(orch, key) != type(orch).model_fields[key].get_default(call_default_factory=True)]
        if unused:
            notes.append(f"warning: SFT on a data set samples no environment, so {', '.join(unused)} "
                         f"{'is' if len(unused) == 1 else 'are'} not used (online evals use [eval]'s environments)")
    buffer = config.orchestrator.buffer
    if (buffer.easy_threshold is not None or buffer.hard_threshold is not None) and not buffer.online_difficulty_filtering:
        notes.append("warning: easy_threshold/hard_threshold are set without orchestrator.buffer."
                     "online_difficulty_filtering: examples past them are no longer drawn, but groups with equal "
                     "rewards (no signal) are still trained on; set online_difficulty_filtering = true to drop those")
    return notes
