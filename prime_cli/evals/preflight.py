"""Everything an eval can check before it costs anything: before the local model is started (60-90 s)
and before any request is sent. Run folders (-R, --retry-errors, -o), the environment and its
arguments, and the endpoints (-m, -b, -k, -e) are checked here, in that order, reading files only.

`-R DIR` / `--retry-errors DIR` continue the run as it was made: its model, base URL, key variable,
registry, environment arguments and sampling arguments come from its metadata.json unless given on
the command line. A flag that contradicts the run (another -m, other -a) is an error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import prime_cli.envs as vf
from prime_cli.clients.command_flags import is_local_model
from prime_cli.envs.errors import EnvConfigError
from prime_cli.records.eval_run import MetadataRecord
from prime_cli.results.run_folders import check_eval_output_dir, read_eval_run
from prime_cli.runs.metadata import RunDirError

from .config import EvalConfig
from .endpoints import check_endpoints
from .store import default_base_dir, find_resumable


def uses_local(config: EvalConfig) -> bool:
    """A built-in model (`local`, `local-moe`) without a URL of its own: a server is found or started for it."""
    return is_local_model(config.model) and not config.base_url


def load_env(config: EvalConfig) -> vf.Environment:
    env = vf.load_environment(config.env_id, **config.env_args)
    for key, value in config.extra_env_kwargs.items():
        if not hasattr(env, key):
            raise EnvConfigError(f"-x: {type(env).__name__} has no attribute {key!r} to set")
        setattr(env, key, value)
    return env


def preflight(config: EvalConfig) -> tuple[EvalConfig, vf.Environment]:
    """The config to run (completed from a resumed run's metadata) and its loaded environment.
    Raises EnvConfigError (one line for the CLI) on any bad input; writes nothing."""
    config = with_saved_run(config)
    env = load_env(config)
    from .sandboxing import check_sandbox  # lazy: start-up

    check_sandbox(config, env)
    show_routes(check_endpoints(config))
    from .cost_meter import check_cost_cap  # lazy: start-up

    check_cost_cap(config, env)
    return config, env


_SHOWN_ROUTES: set[str] = set()


def show_routes(lines: list[str]) -> None:
    """Where a bare model name goes (`gpt-4.1-mini: OpenAI via LiteLLM, key OPENAI_API_KEY`), once per
    process (a sweep checks the same model for each environment)."""
    import sys  # lazy: already loaded

    for line in lines:
        if line not in _SHOWN_ROUTES:
            _SHOWN_ROUTES.add(line)
            print(line, file=sys.stderr, flush=True)


def _saved_model_dir_name(config: EvalConfig) -> str:
    if uses_local(config):
        from prime_cli.serve.builtin_models import served_name  # lazy: start-up

        return served_name(config.model)
    return config.model


def with_saved_run(config: EvalConfig) -> EvalConfig:
    new_run = config.save_results and not (config.resume or config.retry_errors)
    if config.output_dir and (new_run or config.resume == "latest"):
        out = Path(config.output_dir).expanduser()
        check_eval_output_dir(out, default_base_dir(config.env_id, _saved_model_dir_name(config), out))
    if config.resume:
        flag, field, where = "-R", "resume", config.resume
    elif config.retry_errors:
        flag, field, where = "--retry-errors", "retry_errors", config.retry_errors
    else:
        return config
    if where == "latest":
        model = _saved_model_dir_name(config)
        base = default_base_dir(config.env_id, model, config.output_dir)
        found = find_resumable(base)
        if found is None:
            raise RunDirError(f"-R: no unfinished run of {config.env_id} with {model} under {base}; "
                              "pass the run folder: -R DIR")
        where = str(found)
    run_dir = Path(where)
    meta = read_eval_run(run_dir, flag)
    return config.model_copy(update={field: str(run_dir), **_settings_of_run(config, meta, f"{flag} {run_dir}")})


def _settings_of_run(config: EvalConfig, meta: MetadataRecord, where: str) -> dict[str, Any]:
    given = config.model_fields_set
    if meta.get("env_id") != config.env_id:
        raise RunDirError(f"{where}: that run is of {meta.get('env_id')!r}, not {config.env_id!r}; "
                          f"pass {meta.get('env_id')} as the environment")
    local = bool(meta.get("local_model"))
    if local:
        from prime_cli.serve.builtin_models import builtin_of_served  # lazy: start-up

        builtin = builtin_of_served(str(meta.get("model")))
    names = {meta.get("model")} | ({builtin} if local else set())
    if "model" in given and config.model not in names:
        raise RunDirError(f"{where}: that run is with model {meta.get('model')!r}, not {config.model!r}; "
                          "leave out -m to continue it with its own model")
    saved_args = meta.get("env_args") or {}
    if "env_args" in given and config.env_args != saved_args:
        raise RunDirError(f"{where}: that run was made with -a {saved_args}, not {config.env_args}; "
                          "leave out -a to continue it with its own")
    update: dict[str, Any] = {"env_args": saved_args}
    if "model" not in given:
        update["model"] = builtin if local else meta.get("model")
    if "base_url" not in given and not (local and is_local_model(update.get("model", config.model))):
        update["base_url"] = meta.get("base_url")
    for key in ("api_key_var", "endpoints_path"):
        if key not in given and meta.get(key):
            update[key] = meta[key]
    saved_sampling = meta.get("sampling_args") if isinstance(meta.get("sampling_args"), dict) else {}
    update.update(sampling_args={**saved_sampling, **config.merged_sampling_args()}, max_tokens=None,
                  temperature=None)
    return update
