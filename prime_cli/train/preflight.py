"""Checks of what a training config names on this machine, made by `prime train` before anything starts:
the output folder, the model's weights (`local`, a folder, or the local Hugging Face cache), what its LoRA
can adapt (a Mixture-of-Experts model's fused experts) and the online eval's max_tokens (the environments' own defaults). The config's own rules are in config.py.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from prime_cli.clients.command_flags import LOCAL_MODEL, LOCAL_MOE_MODEL, is_local_model
from prime_cli.envs.eval_defaults import env_eval_defaults

from .errors import TrainConfigError

if TYPE_CHECKING:
    from .config import RLConfig


def check_output_dir(output_dir: str, from_flag: bool) -> None:
    """The output directory is a folder, or can become one (no file on its path)."""
    key = "-o/--output-dir" if from_flag else "output_dir"
    path = Path(output_dir).expanduser()
    fix = "pass a folder, e.g. -o outputs/run1" + ("" if from_flag else " (or change output_dir in the config)")
    if path.exists() and not path.is_dir():
        raise TrainConfigError(f"{key} {output_dir} is a file, not a folder; {fix}")
    for parent in path.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise TrainConfigError(f"{key} {output_dir}: {parent} is a file, not a folder; {fix}")
            return


def hub_cache_dir() -> str:
    """Where huggingface_hub keeps downloaded models (HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/...)."""
    from huggingface_hub import constants  # lazy: optional dependency

    return constants.HF_HUB_CACHE


def model_problem(name: str) -> str | None:
    """Why `[model] name` has no weights on this machine (None: `local`, a folder, or in the HF cache).

    A hub id counts when its config.json is in the local Hugging Face cache: vLLM and the trainer load it
    from there. Without huggingface_hub (installed with the trainer plugin) nothing can be told."""
    choices = f'give a model folder, a Hugging Face id in the local cache, "{LOCAL_MODEL}" (the embedded model) or "{LOCAL_MOE_MODEL}" (a small MoE made from it)'
    if not name.strip():
        return f"model.name is empty; {choices}"
    if is_local_model(name) or Path(name).expanduser().is_dir():
        return None
    if Path(name).expanduser().exists():
        return f"model.name {name!r} is a file, not a model folder; {choices}"
    try:
        from huggingface_hub import try_to_load_from_cache  # lazy: optional dependency
        from huggingface_hub.errors import HFValidationError  # lazy: optional dependency
    except ImportError:
        return None
    try:
        cached = try_to_load_from_cache(name, "config.json")
    except HFValidationError:  # not a hub id either: a folder path that does not exist
        return f"model.name {name!r}: no such folder (and not a Hugging Face id); {choices}"
    except OSError:  # an unreadable cache: vLLM could not load from it either
        cached = None
    if isinstance(cached, str):
        return None
    return (f"model.name {name!r} is not a folder here and not in the local Hugging Face cache ({hub_cache_dir()}); "
            f"download it first (hf download {name}; HF_HOME or HF_HUB_CACHE say where the cache is), "
            f'or give a model folder, "{LOCAL_MODEL}" (the embedded model) or "{LOCAL_MOE_MODEL}" (a small MoE made from it)')


def check_model(config: RLConfig, dry_run: bool) -> list[str]:
    """A real run refuses a model with no local weights; a dry run (which may check a config meant for
    another machine) returns the problem as a note."""
    problem = model_problem(config.model.name)
    if problem is None:
        return []
    if not dry_run:
        raise TrainConfigError(problem)
    return [f"a real run on this machine would refuse the model: {problem}"]


def check_data_sources(config: RLConfig, dry_run: bool) -> list[str]:
    """Every [[data.source]] names data this machine has, in a format that is read (its rows are read by the
    orchestrator); a dry run returns the problems as notes (the config may be meant for another machine)."""
    from .sft_data import describe_bad, read_source  # lazy: heavy

    notes = []
    for source in config.orchestrator.algo.dataset.source if config.orchestrator.algo.dataset is not None else []:
        try:  # read whole (not tokenised: the run checks seq_len), so a bad file stops here, before the folder is touched
            rows = read_source(source, Path.cwd())
            if not rows.conversations:
                raise TrainConfigError(f"data.source dataset {source.dataset}: no usable row"
                                       f"{f' ({describe_bad(rows.bad)})' if rows.bad else ''}; fix the data or remove it")
            if dry_run:
                bad = f"; {describe_bad(rows.bad)}" if rows.bad else ""
                notes.append(f"data: {len(rows.conversations)} rows from {rows.description}{bad}")
        except TrainConfigError as exc:
            if not dry_run:
                raise
            notes.append(f"a real run on this machine would refuse the data: {exc}")
    return notes


def check_adapters(config: RLConfig, dry_run: bool) -> list[str]:
    """`[model] adapter` fits the run's LoRA (initial_adapter.py), and a teacher adapter is a LoRA adapter folder;
    a dry run returns the problems as notes (the adapter may come from a run not made yet)."""
    from prime_cli.serve.errors import ServeError  # lazy: start-up
    from prime_cli.serve.model_dir import read_adapter  # lazy: start-up

    from .initial_adapter import check_initial_adapter  # lazy: start-up

    problems = [problem] if (problem := check_initial_adapter(config)) else []
    orch = config.orchestrator
    for key, path in (("model.adapter", config.model.adapter),
                      *((f"orchestrator.{name}.adapter", teacher.adapter) for name, teacher in
                        (("teacher_model", orch.teacher_model), ("teacher_rollout_model", orch.teacher_rollout_model))
                        if teacher is not None)):
        if path and (inside := _inside_run_entries(Path(path), Path(config.output_dir))):
            raise TrainConfigError(f"{key} {path} is inside {inside} of this run's output_dir, which the run rewrites "
                                   "(a fresh start clears it): copy the adapter elsewhere, or train into another "
                                   "folder with -o DIR")
    for key, teacher in (("orchestrator.teacher_model", orch.teacher_model),
                         ("orchestrator.teacher_rollout_model", orch.teacher_rollout_model)):
        if teacher is None or teacher.adapter is None:
            continue
        try:
            read_adapter(Path(teacher.adapter).expanduser())
        except ServeError as exc:
            problems.append(f"{key}.adapter {teacher.adapter}: {exc}")
    if problems and not dry_run:
        raise TrainConfigError(problems[0])
    return [f"a real run on this machine would refuse the adapter: {problem}" for problem in problems]


def _inside_run_entries(path: Path, output_dir: Path) -> str | None:
    """The entry of output_dir a training run owns (weights/, checkpoints/, ...) that holds `path`, if any."""
    from prime_cli.runs.layouts import TrainingRunLayout  # lazy: start-up

    try:
        relative = path.expanduser().resolve().relative_to(output_dir.expanduser().resolve())
    except ValueError:
        return None
    first = relative.parts[0] if relative.parts else ""
    return f"{first}/" if first in TrainingRunLayout.OWNED else None


def check_lora_targets(config: RLConfig) -> None:
    """What the LoRA must do on a Mixture-of-Experts model (lora_targets.py): no dropout on the fused
    experts, and a vLLM max_lora_rank that holds gate_up's rank 2r."""
    from .lora_targets import (  # lazy: start-up
        MOE_ARCHITECTURES,
        ROUTER_WEIGHT,
        lora_targets_for,
        moe_shape,
    )
    from .model_facts import model_config  # lazy: start-up

    lora = config.trainer.model.lora
    targets = lora_targets_for(config)
    if targets.parameters and lora.dropout:
        raise TrainConfigError(f"trainer.model.lora.dropout = {lora.dropout:g} cannot apply to {config.model.name}'s "
                               "fused expert weights (a Mixture-of-Experts model: peft adapts them as parameters, "
                               "without dropout); set dropout = 0")
    shape = moe_shape(model_config(config.model.name) or {})
    if targets.parameters and shape is not None and shape.architecture not in MOE_ARCHITECTURES:
        raise TrainConfigError(f"{config.model.name} is a Mixture-of-Experts model of architecture "
                               f"{shape.architecture or '(unknown)'}, whose expert adapters prime train cannot hand "
                               f"to vLLM yet (supported: {', '.join(MOE_ARCHITECTURES)}); train another model")
    if ROUTER_WEIGHT in targets.parameters:
        raise TrainConfigError("trainer.model.lora.target_modules names \"router\": vLLM 0.32 does not serve a LoRA "
                               "on an MoE router, so the sampler would route with the base router while the trainer "
                               "routes with the adapted one; remove \"router\"")
    needed = targets.max_rank(lora.rank)
    if config.inference.max_lora_rank is not None and config.inference.max_lora_rank < needed:
        raise TrainConfigError(f"inference.max_lora_rank ({config.inference.max_lora_rank}) is below {needed}, the "
                               f"rank of {config.model.name}'s fused gate_up expert adapters (2 x rank); raise it "
                               f"to {needed} or remove it")


def check_eval_max_tokens(config: RLConfig) -> None:
    """[orchestrator.eval] samples with each environment's own `[tool.prime.eval] max_tokens`: it must
    leave room for a prompt in max_model_len, as orchestrator.sampling.max_tokens must."""
    section = config.orchestrator.eval
    if section is None:
        return
    max_len = config.inference.model.max_model_len
    for env_id in dict.fromkeys(e.id for e in (section.env or config.orchestrator.env)):
        max_tokens = env_eval_defaults(env_id).get("max_tokens")
        if isinstance(max_tokens, int) and max_tokens >= max_len:
            raise TrainConfigError(
                f"orchestrator.eval: environment {env_id!r} evaluates with max_tokens {max_tokens} (its pyproject's "
                f"[tool.prime.eval]), not below inference.model.max_model_len ({max_len}): every eval rollout "
                "would fail; raise max_model_len (and seq_len with it) or lower that max_tokens")


_EVAL_ARGS_FLAG = re.compile(r"-a '(\{.*?\})'")


def train_spelling(reason: str, where: str) -> str:
    """An environment's hint in `prime eval`'s words (`pass -a '{"corpus_path": "..."}'`) in a training
    config's: the args of the entry at `where` (`args = { corpus_path = "..." } in orchestrator.env[0]`)."""
    from .tomlio import _scalar  # lazy: start-up

    def config_args(match: re.Match) -> str:
        try:
            args = json.loads(match[1])
        except ValueError:
            return match[0]
        return f"args = {_scalar(args, 'args')} in {where}" if isinstance(args, dict) else match[0]

    return _EVAL_ARGS_FLAG.sub(config_args, reason)


def client_note(where: str, env_id: str, reason: str) -> str:
    """The dry run's note for a model client an environment cannot make on this machine (a judge's key)."""
    return (f"warning: {where} ({env_id}): {reason}; a real run here refuses it (set the key in the shell or in "
            f"the config's env_file), and this dry run checked {env_id} no further")


@contextmanager
def env_file_variables(paths: list[str]) -> Iterator[None]:
    """The variables of env_file set while the checks load the environments (a judge's key may be there, as
    for the run's parts, where env_file wins over the shell), restored afterwards."""
    from .env_file import env_file_values  # lazy: start-up

    values = env_file_values(paths or [])
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
