"""`prime train CONFIG --part inference|trainer|orchestrator`: one part of a run, alone on this node.

The parts find each other through the config: the orchestrator samples from `orchestrator.client.base_url`
(the inference parts' URLs) and meets the trainer in `output_dir`, which both must see at the same path
(a shared filesystem). The trainer part owns the folder (its checks, its lock, config.json) and then
writes `parts.json` naming its lock; the orchestrator part waits for that before it starts.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

from rich.console import Console

from prime_cli.train.plugin_api import (
    RLConfig,
    ServeError,
    TrainingRunLayout,
    port_in_use,
    served_models,
)

PARTS = ("inference", "trainer", "orchestrator")
MARKER = "parts.json"
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


def write_marker(layout: TrainingRunLayout, config_path: Path) -> None:
    """After the trainer part prepared the folder: which lock holder and which config the other parts use."""
    holder = json.loads(layout.lock_path.read_text() or "{}")
    (layout.output_dir / MARKER).write_text(json.dumps({"lock": holder, "config": str(config_path)}))


def wait_for_trainer(layout: TrainingRunLayout, console: Console, timeout_s: float = TRAINER_WAIT_S) -> Path:
    """The config the trainer part wrote, once its marker names the lock held now. Raises PartError
    when none comes: the trainer part is not running, or this node does not see its output_dir."""
    deadline = time.monotonic() + timeout_s
    with console.status(f"waiting for the trainer part to prepare {layout.output_dir}"):
        while time.monotonic() < deadline:
            try:
                marker = json.loads((layout.output_dir / MARKER).read_text())
                holder = json.loads(layout.lock_path.read_text() or "{}")
            except (OSError, ValueError):
                marker, holder = None, None
            if marker and holder and marker.get("lock") == holder and Path(marker["config"]).exists():
                return Path(marker["config"])
            time.sleep(0.5)
    raise PartError(f"no trainer part prepared {layout.output_dir} within {timeout_s:.0f} s: start `prime train "
                    "CONFIG --part trainer` first, and check that this node sees the same output_dir (a shared "
                    "filesystem, at the same path)")


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
    except KeyboardInterrupt:
        console.print("stopping vLLM")
        return 130
    finally:
        server.stop(grace_s=10.0)
