"""W&B for the trainer: optional, and never in the way of a run.

Without wandb installed the run goes on with metrics.jsonl. Mode "online" first checks in a few seconds
that the W&B server answers (wandb.init itself retries for up to its init_timeout, 90 s by default, when
there is no network) and falls back to offline with one line saying why and how to sync later; so does an
online init that fails (no API key, a refused key). Offline runs end with the `wandb sync` command.
Every line this module prints starts with NOTICE, which the launcher relays from logs/trainer.log to the terminal.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Any

from prime_cli.train.plugin_api import RLConfig, TrainingRunLayout

from ..progress import WANDB_NOTICE as NOTICE

DEFAULT_BASE_URL = "https://api.wandb.ai"
REACH_TIMEOUT_S = 3.0
ONLINE_INIT_TIMEOUT_S = 30.0


def say(message: str) -> None:
    print(NOTICE + message, file=sys.stderr, flush=True)


def unreachable_reason(base_url: str, timeout_s: float = REACH_TIMEOUT_S) -> str | None:
    """Why the W&B server at `base_url` cannot be reached, or None when it answers (any HTTP status).

    httpx honours HTTPS_PROXY / NO_PROXY like wandb does, so a machine that reaches W&B through a proxy
    passes."""
    import httpx

    try:
        httpx.head(base_url, timeout=timeout_s)
    except httpx.HTTPError as exc:
        return f"cannot reach {base_url} ({type(exc).__name__}: {first_line(exc)})"
    return None


def sync_command(run_dir: Path) -> str:
    return f"wandb sync {shlex.quote(str(run_dir))}"


def _init(wandb: Any, config: RLConfig, output_dir: Path, mode: str) -> Any:
    section = config.wandb
    settings = wandb.Settings(silent=True, console="off", disable_git=True,
                              init_timeout=ONLINE_INIT_TIMEOUT_S)
    # config.model_dump() holds env_file names, never their values; W&B's own key is read by wandb
    return wandb.init(project=section.project, name=section.name, entity=section.entity, group=section.group,
                      tags=section.tags or None, id=section.id, resume="allow" if section.id else None,
                      mode=mode, dir=str(output_dir), config=config.model_dump(), settings=settings)


def first_line(exc: BaseException) -> str:
    """The exception's first line, with the W&B key (were it quoted) replaced."""
    text = str(exc).splitlines()[0] if str(exc).strip() else type(exc).__name__
    key = os.environ.get("WANDB_API_KEY")
    return text.replace(key, "***") if key else text


def start(config: RLConfig, output_dir: Path) -> Any | None:
    """A wandb run for `config.wandb`, or None (not configured, wandb not installed, or it cannot start)."""
    if config.wandb is None:
        return None
    try:
        import wandb
    except ImportError:
        say("[wandb] is configured but wandb is not installed (pip install 'prime-cli[wandb]', or pip install "
            f"wandb); metrics go to {TrainingRunLayout.METRICS} only")
        return None
    try:
        return _start(wandb, config, output_dir)
    except Exception as exc:  # noqa: BLE001 - W&B never stops a training run
        say(f"wandb could not start ({type(exc).__name__}: {first_line(exc)}); "
            f"metrics go to {TrainingRunLayout.METRICS} only")
        return None


def _start(wandb: Any, config: RLConfig, output_dir: Path) -> Any:
    if config.wandb.mode == "offline":
        return _init(wandb, config, output_dir, "offline")
    base_url = os.environ.get("WANDB_BASE_URL") or DEFAULT_BASE_URL
    reason = unreachable_reason(base_url)
    if reason is None:
        try:
            return _init(wandb, config, output_dir, "online")
        except wandb.errors.Error as exc:
            message = first_line(exc)
            reason = ("no W&B API key (run `wandb login`, or set WANDB_API_KEY, e.g. in an env_file)"
                      if "api key" in message.lower() else f"wandb.init failed online ({message})")
    run = _init(wandb, config, output_dir, "offline")
    run_dir = offline_run_dir(run)
    say(f"{reason}; logging offline instead: the run is in {run_dir}; upload it later with: {sync_command(run_dir)}")
    return run


def offline_run_dir(run: Any) -> Path:
    return Path(run.settings.sync_dir)


def finish(run: Any | None) -> None:
    """End the run; an offline one prints where it is and the command that uploads it."""
    if run is None:
        return
    offline = run.settings.mode == "offline" or getattr(run.settings, "_offline", False)
    run_dir = offline_run_dir(run)
    run.finish()
    import wandb

    wandb.teardown()  # finish() can return before wandb's service has written the run file; this waits for it
    if offline:
        say(f"offline run saved in {run_dir}; upload it with: {sync_command(run_dir)}")
