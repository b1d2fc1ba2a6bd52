"""An environment's own run defaults: `[tool.prime.eval]` (or `[tool.verifiers.eval]`) of its pyproject.

Shared by `prime eval run` and `prime gepa run`, so that both sample the same way (max_tokens, temperature).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

ENV_DEFAULT_KEYS = ("num_examples", "rollouts_per_example", "max_tokens", "temperature")
SAMPLING_DEFAULT_KEYS = ("max_tokens", "temperature")


def env_eval_defaults(env_id: str) -> dict[str, Any]:
    """`[tool.prime.eval]` (or `[tool.verifiers.eval]`) of the environment's pyproject, if found."""
    from .loader import module_name  # lazy: already loaded

    module = module_name(env_id)
    candidates = [Path.cwd() / "environments" / module / "pyproject.toml"]
    try:
        import importlib.util  # lazy: already loaded

        spec = importlib.util.find_spec(module)
        if spec is not None and spec.origin:
            origin = Path(spec.origin).parent
            candidates += [origin / "pyproject.toml", origin.parent / "pyproject.toml"]
    except (ImportError, ValueError):
        pass
    for candidate in candidates:
        if candidate.is_file():
            try:
                tool = tomllib.loads(candidate.read_text()).get("tool", {})
            except tomllib.TOMLDecodeError:
                continue
            section = tool.get("prime", {}).get("eval") or tool.get("verifiers", {}).get("eval") or {}
            return {k: v for k, v in section.items() if k in ENV_DEFAULT_KEYS}
    return {}


def env_sampling_defaults(env_id: str, given: dict[str, Any]) -> dict[str, Any]:
    """The environment's `max_tokens` / `temperature` defaults for the keys `given` does not set."""
    defaults = env_eval_defaults(env_id)
    return {key: defaults[key] for key in SAMPLING_DEFAULT_KEYS if key in defaults and key not in given}
