"""The eval engine's entry point for the CLI: configs in, runs executed, an exit code out."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path
from typing import Any

from prime_cli.runs.tasks import gather_or_cancel

from .config import EvalConfig, build_config, load_toml_configs, served_locally
from .preflight import preflight, uses_local


def configs_for(target: str, values: dict[str, Any]) -> list[EvalConfig]:
    """An environment id, or a TOML file of `[[eval]]` entries (flags given override its keys)."""
    if target.endswith(".toml") or Path(target).is_file():
        return load_toml_configs(Path(target), overrides=values)
    return [build_config("command line", env_id=target, **values)]


async def _run_all(checked: list[tuple[EvalConfig, Any]], stream: Any) -> list[Any]:
    from .display import make_display  # lazy: heavy
    from .runner import run_eval  # lazy: heavy

    async def one(config: EvalConfig, env: Any, mode: str) -> Any:
        with make_display(mode, stream=stream) as display:
            return await run_eval(config, display, env=env)

    if len(checked) == 1:
        config, env = checked[0]
        return [await one(config, env, config.display)]
    # several runs at once share the terminal: plain lines (or JSON) instead of live panels
    modes = ["json" if c.display == "json" else "plain" for c, _ in checked]
    return await gather_or_cancel(*(one(c, env, m) for (c, env), m in zip(checked, modes, strict=True)))


def run_checked(config: EvalConfig, env: Any, stream: Any = None) -> Any:
    """Run one preflighted config on its display; the EvalOutcome (the checkpoint sweep runs one per step)."""
    return asyncio.run(_run_all([(config, env)], stream or sys.stdout))[0]


def run_evals(target: str, values: dict[str, Any], stream: Any = None) -> int:
    """Run every eval `target` describes; the worst exit code wins (0 ok, 1 failed, 2 config).

    Every config is checked first (`preflight`: run folders, environment, endpoints), so bad input
    fails before anything is started or sent. Configs on the same built-in model (`local`, `local-moe`)
    share one server: a running `prime serve`, or one started here for all of them and stopped at the end. Raises
    ServeError when that is impossible.
    """
    checked = [preflight(config) for config in configs_for(target, values)]
    builtins = list(dict.fromkeys(c.model for c, _ in checked if uses_local(c)))
    if not builtins:
        return _execute(checked, stream)
    from prime_cli.serve.local import local_endpoint  # lazy: start-up
    from prime_cli.serve.startup_status import local_server_status  # lazy: start-up

    with local_server_status() as (status, tick), contextlib.ExitStack() as stack:
        endpoints = {name: stack.enter_context(local_endpoint(status, tick, model=name)) for name in builtins}
        checked = [(served_locally(c, endpoints[c.model].model, endpoints[c.model].url) if uses_local(c) else c,
                    env) for c, env in checked]
        return _execute(checked, stream)


def _execute(checked: list[tuple[EvalConfig, Any]], stream: Any) -> int:
    outcomes = asyncio.run(_run_all(checked, stream or sys.stdout))
    from prime_cli.runs.visible import visible  # lazy: start-up

    for outcome in outcomes:
        if outcome.error:  # may quote a server's or an environment's words
            print(f"error: {visible(outcome.error, multiline=True)}", file=sys.stderr)
    return max(outcome.exit_code for outcome in outcomes)
