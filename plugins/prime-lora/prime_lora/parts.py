"""`prime train CONFIG --part inference|trainer|orchestrator`: one part of a run, alone on this node.

The parts find each other through the config: the orchestrator samples from `orchestrator.client.base_url`
(the inference parts' URLs) and meets the trainer in `output_dir`, which both must see at the same path
(a shared filesystem). The trainer part owns the folder (its checks, its lock, config.json), starts its
heartbeat and then writes `parts.json` naming its lock; the orchestrator part and the other trainer nodes
wait for that before they start, and from then on each part notices when another is gone (liveness.py).
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from prime_cli.train.plugin_api import (
    RLConfig,
    ServeError,
    TrainingRunLayout,
    port_in_use,
    served_models,
    write_json_atomic,
)

from .liveness import (
    DEFAULT_TIMEOUT_S,
    TIMEOUT_ENV,
    TRAINER,
    Liveness,
    clear_heartbeats,
    seconds_from_env,
    session_of,
)
from .stops import exit_code
from .waits import DEFAULT_NOTICE_S, NOTICE_ENV, WaitNotice

PARTS = ("inference", "trainer", "orchestrator")
TRAINER_WAIT_S = 600.0


class PartError(Exception):
    """A part cannot start (one line for the user)."""


def unreachable_servers(urls: list[str]) -> list[str]:
    return [url for url in urls if served_models(url, timeout=5.0) is None]


def check_servers(config: RLConfig) -> None:
    """Every server of orchestrator.client.base_url answers, before anything starts."""
    urls = config.orchestrator.client.base_url or []
    down = unreachable_servers(urls)
    if down:
        raise PartError(f"orchestrator.client.base_url: nothing answers at {', '.join(down)}; start the inference "
                        "part there first (prime train CONFIG --part inference) or fix the URL")


def liveness_settings() -> tuple[float, float]:
    """(the bound after which a silent part is gone, how often a waiting part says so) from the environment."""
    try:
        return (seconds_from_env(TIMEOUT_ENV, DEFAULT_TIMEOUT_S), seconds_from_env(NOTICE_ENV, DEFAULT_NOTICE_S))
    except ValueError as exc:
        raise PartError(str(exc)) from None


def write_marker(layout: TrainingRunLayout, config_path: Path, liveness_for: Callable[[str], Liveness]) -> Liveness:
    """After the trainer part prepared the folder: its heartbeat starts (earlier sessions' are cleared), then
    parts.json names the lock holder (the session) and the config the other parts use."""
    holder = json.loads(layout.lock_path.read_text() or "{}")
    clear_heartbeats(layout)
    liveness = liveness_for(session_of(holder))
    liveness.start()
    write_json_atomic(layout.parts_marker_path, {"lock": holder, "config": str(config_path)})
    return liveness


def _prepared(layout: TrainingRunLayout) -> tuple[Path, str] | None:
    """(config, session) once parts.json names the lock held now and node 0's heartbeat is not an ended one."""
    try:
        marker = json.loads(layout.parts_marker_path.read_text())
        holder = json.loads(layout.lock_path.read_text() or "{}")
    except (OSError, ValueError):
        return None
    if not (isinstance(marker, dict) and holder and marker.get("lock") == holder and Path(marker["config"]).exists()):
        return None
    session = session_of(holder)
    try:
        beat = json.loads(layout.heartbeat_path(TRAINER).read_text())
    except (OSError, ValueError):
        return None
    if beat.get("session") != session or beat.get("state") != "running":  # a trainer part that has ended
        return None
    return Path(marker["config"]), session


def wait_for_trainer(layout: TrainingRunLayout, console: Console, notice_s: float,
                     timeout_s: float = TRAINER_WAIT_S) -> tuple[Path, str]:
    """The config the trainer part wrote and the run's session, once its marker names the lock held now and
    its heartbeat runs; says so every `notice_s`. Raises PartError when none comes: the trainer part is not
    running, or this node does not see its output_dir."""
    deadline = time.monotonic() + timeout_s
    notice = WaitNotice(notice_s, lambda line: console.print(line, highlight=False, markup=False))
    awaited = f"the trainer part to prepare {layout.output_dir} (start it: prime train CONFIG --part trainer)"
    with console.status(f"waiting for the trainer part to prepare {layout.output_dir}"):
        while time.monotonic() < deadline:
            if found := _prepared(layout):
                return found
            notice.update(awaited)
            time.sleep(0.5)
    raise PartError(f"no trainer part prepared {layout.output_dir} within {timeout_s:.0f} s: start `prime train "
                    "CONFIG --part trainer` first, and check that this node sees the same output_dir (a shared "
                    "filesystem, at the same path)")


def resume_every_part(config_path: Path, step: int, nodes: int) -> str:
    """The commands that continue a run of parts from `step`, one for each part."""
    command = f"prime train {config_path} --resume-step {step}"
    trainers = [f"{command} --part trainer"] + [f"{command} --part trainer --node-rank {n}" for n in range(1, nodes)]
    return ("; ".join([*trainers, f"{command} --part orchestrator"]) +
            " (each on its node; the inference parts go on serving, or start them again with --part inference)")


def public_url(host: str, port: int) -> str:
    """The URL other nodes use: this node's name when the server listens on every address."""
    name = socket.gethostname() if host in ("0.0.0.0", "::") else host
    return f"http://{name}:{port}/v1"


def serve_inference(config: RLConfig, console: Console) -> int:
    """vLLM for the run on inference.host:inference.port (no other port: the other nodes' config names it),
    with runtime LoRA loading, until Ctrl-C; the orchestrator loads each adapter from output_dir."""
    from prime_cli.train.plugin_api import env_file_values, training_weights

    from .inference import InferenceServer, inference_options

    inference = config.inference
    if port_in_use(inference.host, inference.port):
        raise PartError(f"inference.port {inference.port} on {inference.host} is in use; stop what holds it or "
                        "set another port (and the same in the orchestrator's orchestrator.client.base_url)")
    resolved = training_weights(config.model.name)
    options = inference_options(config, str(resolved.path), resolved.served_name)
    log = TrainingRunLayout(Path(config.output_dir)).log_path("inference")
    if not log.parent.is_dir():  # the inference node may not see output_dir: its log stays local
        log = Path("logs") / f"inference-{inference.port}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    server = InferenceServer(options, log, config.inference_gpu_ids, env_file_values(config.env_file))
    server.start()
    try:
        with console.status("starting vLLM"):
            server.wait_ready()
        console.print(f"inference ready: {public_url(inference.host, options.port)} (log: {log}); put it in the "
                      "orchestrator's orchestrator.client.base_url. Ctrl-C stops it.")
        while server.returncode is None:
            time.sleep(1.0)
        console.print(f"[bold red]inference failed:[/] vLLM exited (code {server.returncode}). Last lines of {log}:\n"
                      f"{server.log_tail()}")
        return 1
    except ServeError as exc:
        console.print(f"[bold red]error:[/] {exc}")
        return 2
    except KeyboardInterrupt as stop:
        console.print("stopping vLLM")
        return exit_code(stop)
    finally:
        server.stop(grace_s=10.0)
