"""The checkpoint sweep, `prime eval run ENV --weights-dir OUT/weights`: every saved adapter of a training
run (weights/step_N, PEFT) evaluated on one vLLM server, plus the base model, as ordinary saved eval runs.

Each adapter is loaded at run time (`POST /v1/load_lora_adapter`) under its own name, `step_N`, which is
also the run's model name (so the runs land in `outputs/evals/<env>--step_N/` and `prime eval tui`
lists them); it is unloaded again when its run ends, so the server holds one adapter at a time
(`--max-loras 1` is enough) and a later sweep can use the same names. An adapter left loaded under
that name (an interrupted sweep) is unloaded first, so a name never points at stale prefix-cached
weights. Each run's metadata.json says which weights it evaluated (`sweep`).

`-m local` starts the embedded model's vLLM with LoRA enabled (the largest adapter rank), or uses a
running `prime serve` started with `--enable-lora`. `-b URL` needs a server that allows runtime LoRA
loading. A refused load stops the sweep with one line naming the fix; the steps already evaluated are
saved and shown.

The environment is built as the run trained it: without `-a` (or `env_args` in a TOML entry) the args come
from the run's OUT/config.json (prime_cli.runs.training_env_args, one `note:` line says so); an explicit `-a`
wins, and where it differs from the run's one `warning:` line names each difference.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prime_cli.envs.errors import UserInputError
from prime_cli.runs.layouts import TrainingRunLayout, step_dir_name, steps_in
from prime_cli.runs.status import RunStatus
from prime_cli.runs.training_env_args import (
    args_difference,
    env_args_flag,
    read_run_config,
    run_config_path,
    run_env_ids,
    trained_env_args,
)
from prime_cli.serve.errors import ServeError
from prime_cli.serve.lora_runtime import (
    AdapterLoadError,
    load_adapter,
    served_model_cards,
    unload_adapter,
    vllm_lora_rank,
)
from prime_cli.serve.model_dir import AdapterInfo, read_adapter

from .api import configs_for, run_checked
from .config import EvalConfig, served_locally
from .preflight import preflight, uses_local
from .runner import resolve_counts
from .sweep_table import SweepRow, print_json, print_table, sweep_row


class SweepError(UserInputError):
    """Bad sweep input, or a server that cannot load the adapters (one line, exit 2)."""


@dataclass
class Adapter:
    step: int
    name: str  # the served name and the run's model name: step_N
    info: AdapterInfo


def weights_folder(path: Path) -> Path:
    """The folder of step_N adapters: `path` itself, or `path/weights` for a training run's output folder."""
    if not path.is_dir():
        raise SweepError(f"--weights-dir {path} is not a folder; pass a training run's weights/ folder "
                         "(e.g. outputs/rl/reverse-text-cpu/weights)")
    nested = path / TrainingRunLayout.WEIGHTS
    return nested if not steps_in(path) and steps_in(nested) else path


def find_adapters(weights_dir: Path, steps: list[int] | None) -> list[Adapter]:
    """The step_N adapters to evaluate, ascending: `steps` (each must exist) or all of them."""
    available = steps_in(weights_dir)
    if not available:
        raise SweepError(f"--weights-dir {weights_dir} holds no step_N adapter folders; pass the weights/ "
                         "folder of a `prime train` run")
    wanted = sorted(set(steps)) if steps else available
    missing = [s for s in wanted if s not in available]
    if missing:
        raise SweepError(f"--steps: no {', '.join(step_dir_name(s) for s in missing)} in {weights_dir}; "
                         f"available steps: {','.join(str(s) for s in available)}")
    adapters = []
    for step in wanted:
        name = step_dir_name(step)
        try:
            adapters.append(Adapter(step, name, read_adapter(weights_dir / name)))
        except ServeError as exc:
            raise SweepError(str(exc)) from None
    return adapters


def sweep_config(target: str, values: dict[str, Any]) -> EvalConfig:
    """The one eval the sweep repeats per model; always saved."""
    if values.get("resume") or values.get("retry_errors"):
        raise SweepError("--weights-dir starts new runs; it cannot be combined with -R or --retry-errors")
    configs = configs_for(target, {**values, "save_results": True})
    if len(configs) != 1:
        raise SweepError(f"--weights-dir sweeps one eval, and {target} has {len(configs)} [[eval]] entries; "
                         "pass the environment id, or a config with one entry")
    config = configs[0]
    if not uses_local(config) and not config.base_url:
        raise SweepError(f"--weights-dir needs a server that loads the adapters, not the endpoint {config.model!r}: "
                         "-m local (the embedded model), or -b URL of a vLLM server with runtime LoRA loading")
    return config


def with_trained_env_args(config: EvalConfig, values: dict[str, Any], weights_dir: Path) -> tuple[EvalConfig, str | None]:
    """`config` with the env args of the training run that wrote `weights_dir` (its OUT/config.json) unless
    they were given, and the one line to print about them (None: nothing to say)."""
    path = run_config_path(weights_dir)
    run = read_run_config(path) if path else None
    if path is None or run is None:
        return config, None
    trained = trained_env_args(run, config.env_id)
    if trained is None:
        ids = ", ".join(run_env_ids(run)) or "no environment"
        return config, (f"note: the run of {path} trained on {ids}, not {config.env_id}: "
                        f"{config.env_id} is built with {'-a as given' if config.env_args else 'its defaults'}")
    given = "env_args" in values or bool(config.env_args)
    if not given:
        if not trained:
            return config, None
        return (config.model_copy(update={"env_args": trained}),
                f"note: env args from the training run ({path}):{env_args_flag(trained)} (-a overrides them)")
    difference = args_difference(config.env_args, trained)
    if difference is None:
        return config, None
    return config, (f"warning: -a differs from the env args the run trained {config.env_id} with ({path}): "
                    f"{difference}; the scores may not match its training or its online evals")


def _auth_headers(config: EvalConfig) -> dict[str, str]:
    from prime_cli.clients.registry import NO_KEY, api_key_for  # lazy: already loaded

    from .endpoints import endpoint_specs  # lazy: already loaded

    spec = endpoint_specs(config)[0]
    key = api_key_for(spec)
    return {**spec.headers, **({"Authorization": f"Bearer {key}"} if key and key != NO_KEY else {})}


def _base_model_path(adapters: list[Adapter], weights_dir: Path) -> tuple[str, Path | None] | None:
    """The adapters' base_model_name_or_path, and the folder it names when one exists (a relative
    path is looked up from here, then beside the weights' ancestors, where `prime train` ran)."""
    base = next((a.info.base_model for a in reversed(adapters) if a.info.base_model), None)
    if base is None:
        return None
    path = Path(base).expanduser()
    candidates = [path] if path.is_absolute() else [path, *(parent / path for parent in weights_dir.resolve().parents)]
    return base, next((c.resolve() for c in candidates if c.is_dir()), None)


def base_model_mismatch(adapters: list[Adapter], weights_dir: Path, served_path: str | None) -> str | None:
    """A warning when the adapters' base model is known and is not the served one (None: same, or unknown)."""
    base = _base_model_path(adapters, weights_dir)
    if base is None or not served_path:
        return None
    name, folder = base
    served = Path(served_path).expanduser()
    if folder is not None and served.is_dir():
        same = folder == served.resolve()
    else:
        same = name == served_path or Path(name).name == served.name
    if same:
        return None
    return (f"warning: the adapters were trained on {name}, but the server serves {served_path}; "
            "their scores may mean nothing (serve the base model they were trained on)")


def _served_base(config: EvalConfig, values: dict[str, Any], headers: dict[str, str]) -> tuple[str, str | None]:
    """`-b URL`: the base model's name (-m, else the first model the server lists) and its path (vLLM's `root`)."""
    assert config.base_url
    cards = served_model_cards(config.base_url, headers)
    if cards is None:
        raise SweepError(f"nothing answers at {config.base_url}/models; start the vLLM server first "
                         "(VLLM_ALLOW_RUNTIME_LORA_UPDATING=True vllm serve MODEL --enable-lora)")
    bases = [c for c in cards if not c.get("parent")]
    if "model" in values:
        card = next((c for c in bases if c["id"] == config.model), None)
        return config.model, card.get("root") if card else None
    if not bases:
        raise SweepError(f"the server at {config.base_url} lists no base model; pass it with -m NAME")
    return str(bases[0]["id"]), bases[0].get("root")


def _load_fix(config: EvalConfig, rank: int) -> str:
    # `prime serve` takes a built-in name (the user's -m) or a folder, not a served model id
    local = config.builtin_name
    serve = ("prime serve" if local in (None, "local") else f"prime serve {local}") if config.served_local \
        else "prime serve MODEL_FOLDER"
    return (f"the server at {config.base_url} must allow runtime LoRA loading: start it as "
            f"`VLLM_ALLOW_RUNTIME_LORA_UPDATING=True vllm serve MODEL --enable-lora --max-lora-rank "
            f"{vllm_lora_rank(rank)}` (or `{serve} --enable-lora --max-lora-rank {vllm_lora_rank(rank)}`)")


def _tagged(config: EvalConfig, model: str, weights_dir: Path, adapter: Adapter | None) -> EvalConfig:
    run = config.model_copy(update={"model": model}) if adapter else config
    if adapter:
        run.serve_locally(None)  # the run's model is the adapter's name, not the embedded model
    run._sweep = {"weights_dir": str(weights_dir.resolve()), "step": adapter.step if adapter else None,
                  "adapter": adapter.name if adapter else None}
    return run


class _Sweep:
    def __init__(self, config: EvalConfig, env: Any, weights_dir: Path, adapters: list[Adapter], eval_base: bool,
                 stream: Any) -> None:
        self.config, self.env, self.weights_dir, self.adapters = config, env, weights_dir, adapters
        self.eval_base, self.stream = eval_base, stream or sys.stdout
        self.rows: list[SweepRow] = []
        self.codes: list[int] = []
        self.rollouts = resolve_counts(config)[1]
        self.rank = max(a.info.rank for a in adapters)

    def note(self, text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    def evaluate(self, label: str, run: EvalConfig, step: int | None) -> bool:
        """Run one eval; False after Ctrl-C (the sweep ends there). One that ended with an error (an
        unusable endpoint) stops the sweep."""
        outcome = run_checked(run, self.env, self.stream)
        self.codes.append(outcome.exit_code)
        self.rows.append(sweep_row(label, step, run.model, outcome, self.rollouts, run.pass_threshold))
        if outcome.error:
            self.stop(f"{label}: {outcome.error}")
        return outcome.status != RunStatus.CANCELLED

    def run(self, base: EvalConfig, headers: dict[str, str]) -> int:
        if self.eval_base and not self.evaluate("base", _tagged(base, base.model, self.weights_dir, None), None):
            return self.finish()
        url = base.base_url
        assert url
        for adapter in self.adapters:
            try:
                unload_adapter(url, adapter.name, headers=headers)  # a leftover of an interrupted sweep
                load_adapter(url, adapter.name, adapter.info.path, inplace=False, headers=headers)
            except AdapterLoadError as exc:
                self.stop(f"{exc}; {_load_fix(base, self.rank)}")
            try:
                go_on = self.evaluate(adapter.name, _tagged(base, adapter.name, self.weights_dir, adapter),
                                      adapter.step)
            finally:
                with contextlib.suppress(AdapterLoadError):  # the server went away: the run says so
                    unload_adapter(url, adapter.name, headers=headers)
            if not go_on:
                break
        return self.finish()

    def finish(self) -> int:
        self.show()
        return max(self.codes, default=0)

    def show(self) -> None:
        if not self.rows:
            return
        if self.config.display == "json":
            print_json(self.rows, self.weights_dir, self.stream)
        else:
            print_table(self.rows, self.weights_dir, self.stream)

    def stop(self, message: str) -> None:
        """Show what is done (those runs are saved) and stop with one error line."""
        self.show()
        done = f" ({len(self.rows)} evaluated and saved)" if self.rows else ""
        raise SweepError(f"{message}{done}".replace("\n", " "))


def run_sweep(target: str, values: dict[str, Any], weights_dir: str, steps: list[int] | None = None,
              eval_base: bool = True, stream: Any = None) -> int:
    """Evaluate the base model (unless not `eval_base`) and every adapter of `weights_dir` (or `steps`);
    print the table. Returns the worst exit code; raises SweepError/ServeError (one line) on bad input
    or when the server cannot load an adapter."""
    folder = weights_folder(Path(weights_dir).expanduser())
    adapters = find_adapters(folder, steps)
    config, args_line = with_trained_env_args(sweep_config(target, values), values, folder)
    config, env = preflight(config)
    sweep = _Sweep(config, env, folder, adapters, eval_base, stream)
    if args_line:
        sweep.note(args_line)
    if not uses_local(config):
        headers = _auth_headers(config)
        model, served_path = _served_base(config, values, headers)
        if warning := base_model_mismatch(adapters, folder, served_path):
            sweep.note(warning)
        return sweep.run(config.model_copy(update={"model": model}), headers)
    from prime_cli.serve.local import local_endpoint  # lazy: start-up
    from prime_cli.serve.startup_status import local_server_status  # lazy: start-up

    with (local_server_status() as (status, tick),
          local_endpoint(status, tick, lora_rank=sweep.rank, model=config.model) as endpoint):
        if warning := base_model_mismatch(adapters, folder, endpoint.model_path):
            sweep.note(warning)
        return sweep.run(served_locally(config, endpoint.model, endpoint.url), {})
