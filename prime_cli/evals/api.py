"""The eval engine's entry point for the CLI: configs in, runs executed, an exit code out."""

from __future__ import annotations

import asyncio
import sys
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


def run_evals(target: str, values: dict[str, Any], stream: Any = None) -> int:
    """Run every eval `target` describes; the worst exit code wins (0 ok, 1 failed, 2 config)."""
    configs = configs_for(target, values)
    outcomes = asyncio.run(_run_all(configs, stream or sys.stdout))
    for outcome in outcomes:
        if outcome.error:
            print(f"error: {outcome.error}", file=sys.stderr)
    return max(outcome.exit_code for outcome in outcomes)
