"""`-m local`: find the server `prime serve` left running, or start one for the duration of a run.

`prime serve` records each server it runs in `<cache>/servers/<port>.json`; records whose process is
gone or that no longer answer are pruned when read. Servers started for a single run are not
recorded (they stop when the run ends, so nobody else may rely on them).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from prime_cli.runs.atomic import write_json_atomic

from .embedded import EMBEDDED_NAME, ensure_embedded_model
from .paths import logs_dir, servers_dir
from .server import ServerOptions, VllmServer, free_port, served_models

Status = Callable[[str], None]


@dataclass
class LocalEndpoint:
    url: str
    model: str
    pid: int | None
    started_here: bool


def record_server(options: ServerOptions, pid: int) -> Path:
    servers_dir().mkdir(parents=True, exist_ok=True)
    path = servers_dir() / f"{options.port}.json"
    record = {"pid": pid, "port": options.port, "url": options.url, "models": options.served_names,
              "model_path": str(options.model_path), "started_at": time.time()}
    write_json_atomic(path, record, indent=2)
    return path


def forget_server(port: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        (servers_dir() / f"{port}.json").unlink()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running_servers() -> list[dict]:
    """Live servers recorded by `prime serve`, newest first (stale records are removed)."""
    records = []
    for path in sorted(servers_dir().glob("*.json")) if servers_dir().is_dir() else []:
        try:
            record = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if not _pid_alive(int(record.get("pid", 0))) or served_models(record["url"]) is None:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            continue
        records.append(record)
    return sorted(records, key=lambda r: (EMBEDDED_NAME not in r["models"], -r.get("started_at", 0)))


@contextlib.contextmanager
def local_endpoint(status: Status = lambda _: None,
                   tick: Callable[[float], None] = lambda _: None) -> Iterator[LocalEndpoint]:
    """The embedded model's endpoint: a running `prime serve`, else a server started and stopped here."""
    for record in running_servers():
        status(f"using the local server at {record['url']} (pid {record['pid']})")
        yield LocalEndpoint(record["url"], record["models"][0], record["pid"], started_here=False)
        return
    model_path = ensure_embedded_model(status)
    options = ServerOptions(model_path=model_path, served_names=[EMBEDDED_NAME], port=free_port())
    server = VllmServer(options, logs_dir() / f"vllm-{options.port}.log")
    status(f"starting vLLM for {EMBEDDED_NAME} on port {options.port} (stopped when the run ends; "
           "`prime serve` keeps one running)")
    server.start()
    try:
        started = time.monotonic()
        server.wait_ready(tick)
        status(f"vLLM ready in {time.monotonic() - started:.0f} s")
        yield LocalEndpoint(options.url, EMBEDDED_NAME, server.pid, started_here=True)
    finally:
        server.stop()
