"""Sandboxes in an eval run: the provider checked before anything runs, stats in the summary.

An environment needs a sandbox when it has a `sandbox_provider` attribute (every `vf.SandboxEnv`,
and an EnvGroup holding one). For those, and only those, `prime_cli.sandbox` is imported:
- preflight: the provider the run will use (`--sandbox` / a config's `sandbox` key, else
  `PRIME_SANDBOX`, else the environment's wish, else bwrap) must be able to run here, or the run is
  refused with its one line (exit 2, nothing written);
- at the start: the user's choice is set for the process, the sandbox stats are reset, containers
  left by a SIGKILLed earlier run are pruned, and `--sandbox none` prints a warning;
- at the end: every sandbox still open is closed (Ctrl-C), and `record()` gives the summary's and
  metadata.json's `sandbox` field.
"""

from __future__ import annotations

import logging
from typing import Any

from prime_cli.envs.errors import EnvConfigError

logger = logging.getLogger("prime_cli.evals")
UNSANDBOXED_WARNING = ("--sandbox none: model-written code runs unsandboxed, as a plain process on this machine "
                       "with your user's access to its files, network and processes")


def requested_providers(env: Any) -> list[str | None]:
    """The provider each sandboxed part of `env` asks for (None: no wish); empty: no sandbox needed."""
    if hasattr(env, "sandbox_provider"):
        return [env.sandbox_provider]
    found: list[str | None] = []
    for child in getattr(env, "envs", None) or []:
        found += requested_providers(child)
    return found


def needs_sandbox(env: Any) -> bool:
    return bool(requested_providers(env))


def provider_name(config: Any, env: Any) -> str:
    from prime_cli.sandbox import chosen_name  # lazy: already loaded

    wishes = requested_providers(env)
    return config.sandbox or chosen_name(wishes[0] if wishes else None)


def check_sandbox(config: Any, env: Any) -> None:
    """Raise EnvConfigError (one line) when the environment needs a sandbox no provider here can give."""
    if not needs_sandbox(env):
        return
    from prime_cli.sandbox import (  # lazy: already loaded
        SandboxUnavailable,
        chosen_name,
        get_provider,
    )

    wishes = set(requested_providers(env))
    try:
        names = {config.sandbox} if config.sandbox else {chosen_name(wish) for wish in wishes}
        for name in sorted(names):
            try:
                provider = get_provider(name)
            except ImportError:  # a provider module this install lacks
                raise SandboxUnavailable(f"the {name} provider is not part of this prime install; "
                                         "pick another with --sandbox bwrap|podman|docker|none") from None
            reason = provider.unavailable_reason()
            if reason is not None:
                raise SandboxUnavailable(reason)
    except SandboxUnavailable as exc:
        raise EnvConfigError(f"{config.env_id} runs model-written code in a sandbox: {exc}") from None


async def start_run(config: Any, env: Any, display: Any) -> bool:
    """Set the run's provider, reset the stats, prune what a killed run left; True when sandboxed."""
    if not needs_sandbox(env):
        return False
    from prime_cli.sandbox import STATS, use_provider  # lazy: already loaded

    if config.sandbox:
        use_provider(config.sandbox)
    STATS.reset()
    if provider_name(config, env) == "none":
        display.message(UNSANDBOXED_WARNING, "warning")
    try:  # the containers' inventory, where present
        from prime_cli.sandbox.inventory import prune_dead_owners  # lazy: start-up
    except ImportError:
        return True
    try:
        removed = prune_dead_owners()
        if removed:
            logger.info("removed %d sandbox(es) left by runs that were killed", removed)
    except Exception as exc:  # pruning leftovers never stops a run
        logger.warning("could not prune sandboxes left by killed runs: %s", exc)
    return True


async def close_all() -> None:
    from prime_cli.sandbox import close_all as close_every_sandbox  # lazy: already loaded

    await close_every_sandbox()


def record(config: Any, env: Any) -> dict[str, Any]:
    """{provider, isolated, started, failed, start_p50_s, start_p95_s} of this run's sandboxes."""
    from prime_cli.sandbox import STATS, get_provider  # lazy: already loaded

    name = provider_name(config, env)
    rows = STATS.summary()
    row = rows.get(name) or {"started": 0, "failed": 0, "start_p50_s": 0.0, "start_p95_s": 0.0}
    isolated = get_provider(name).isolated
    out: dict[str, Any] = {"provider": name, "isolated": isolated, **row}
    if not isolated:
        out["note"] = "unsandboxed"
    others = {other: values for other, values in rows.items() if other != name}
    if others:
        out["other_providers"] = others
    return out


def summary_text(sandbox: Any) -> str | None:
    """`bwrap 20 started, 0 failed, start p50 0.031 s / p95 0.052 s` (the summary's Sandboxes line)."""
    if not isinstance(sandbox, dict) or "provider" not in sandbox:
        return None
    from prime_cli.sandbox import summary_line  # lazy: already loaded

    rows = {sandbox["provider"]: {k: sandbox.get(k, 0) for k in ("started", "failed", "start_p50_s", "start_p95_s")}}
    rows.update(sandbox.get("other_providers") or {})
    line = summary_line(rows) or ""
    text = line.removeprefix("sandboxes: ")
    if not sandbox.get("isolated", True) and "unsandboxed" not in text:
        text += " (unsandboxed)"
    return text
