"""The eval engine's entry point for the CLI: configs in, runs executed, an exit code out."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .config import EvalConfig, build_config, load_toml_configs


def configs_for(target: str, values: dict[str, Any]) -> list[EvalConfig]:
    """An environment id, or a TOML file of `[[eval]]` entries (flags given override its keys)."""
    if target.endswith(".toml") or Path(target).is_file():
        return load_toml_configs(Path(target), overrides=values)
    return [build_config("command line", env_id=target, **values)]


async def _run_all(configs: list[EvalConfig], stream: Any) -> list[Any]:
    from .display import make_display
    from .runner import run_eval

    async def one(config: EvalConfig, mode: str) -> Any:
        with make_display(mode, stream=stream) as display:
            return await run_eval(config, display)

    if len(configs) == 1:
        return [await one(configs[0], configs[0].display)]
    # several runs at once share the terminal: plain lines (or JSON) instead of live panels
    modes = ["json" if c.display == "json" else "plain" for c in configs]
    return list(await asyncio.gather(*(one(c, m) for c, m in zip(configs, modes, strict=True))))


LOCAL_MODEL = "local"


def _uses_local(config: EvalConfig) -> bool:
    return config.model == LOCAL_MODEL and not config.base_url


def run_evals(target: str, values: dict[str, Any], stream: Any = None) -> int:
    """Run every eval `target` describes; the worst exit code wins (0 ok, 1 failed, 2 config).

    Configs on the embedded `local` model share one server: a running `prime serve`, or one started
    here for all of them and stopped at the end. Raises ServeError when that is impossible.
    """
    configs = configs_for(target, values)
    if not any(_uses_local(c) for c in configs):
        return _execute(configs, stream)
    from prime_cli.serve.local import local_endpoint

    with local_server_status() as (status, tick), local_endpoint(status, tick) as endpoint:
        configs = [c.on_local_server(endpoint.model, endpoint.url) if _uses_local(c) else c for c in configs]
        return _execute(configs, stream)


@contextlib.contextmanager
def local_server_status() -> Iterator[tuple[Callable[[str], None], Callable[[float], None]]]:
    """Startup messages on stderr (a spinner on a terminal) so stdout stays the run's own output."""
    from rich.console import Console

    console = Console(stderr=True, highlight=False)
    spinner = console.status("", spinner="dots") if console.is_terminal else None

    def status(message: str) -> None:  # each message ends the spinner; ticks restart it
        if spinner is not None:
            spinner.stop()
        console.print(f"[dim]local model: {message}[/dim]")

    def tick(elapsed: float) -> None:
        if spinner is not None:
            spinner.update(f"starting vLLM ({elapsed:.0f} s)")
            spinner.start()

    try:
        yield status, tick
    finally:
        if spinner is not None:
            spinner.stop()


def _execute(configs: list[EvalConfig], stream: Any) -> int:
    outcomes = asyncio.run(_run_all(configs, stream or sys.stdout))
    for outcome in outcomes:
        if outcome.error:
            print(f"error: {outcome.error}", file=sys.stderr)
    return max(outcome.exit_code for outcome in outcomes)
