"""`-m local` (or `-m local-moe`): find the server `prime serve` left running, or start one for the
duration of a run.

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

from .builtin_models import builtin_folder, served_name
from .embedded import EMBEDDED_NAME
from .errors import ServeError
from .lora_runtime import vllm_lora_rank
from .paths import logs_dir, servers_dir
from .server import ServerOptions, VllmServer, free_port, served_models

Status = Callable[[str], None]


@dataclass
class LocalEndpoint:
    url: str
    model: str
    pid: int | None
    started_here: bool
    model_path: str | None = None  # the folder the server serves, when known


def record_server(options: ServerOptions, pid: int) -> Path:
    servers_dir().mkdir(parents=True, exist_ok=True)
    path = servers_dir() / f"{options.port}.json"
    lora = bool(options.enable_lora or options.loras)
    record = {"pid": pid, "port": options.port, "url": options.url, "models": options.served_names,
              "model_path": str(options.model_path), "started_at": time.time(),
              # --lora adapters start vLLM with --enable-lora too (server.py): it then takes others at run time
              "lora": lora, "max_lora_rank": options.max_lora_rank if lora else None}
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


def _lora_problem(record: dict, rank: int, model: str) -> str | None:
    """Why a running server cannot take adapters of rank `rank` at run time (None: it can)."""
    serve = "prime serve" if model == "local" else f"prime serve {model}"
    fix = f"stop it (Ctrl-C) or run `{serve} --enable-lora --max-lora-rank {vllm_lora_rank(rank)}` instead"
    if not record.get("lora"):
        return f"the running `prime serve` at {record['url']} (pid {record['pid']}) was started without LoRA; {fix}"
    if int(record.get("max_lora_rank") or 0) < rank:
        return (f"the running `prime serve` at {record['url']} (pid {record['pid']}) takes LoRA ranks up to "
                f"{record.get('max_lora_rank')}, the adapters have rank {rank}; {fix}")
    return None


@contextlib.contextmanager
def local_endpoint(status: Status = lambda _: None, tick: Callable[[float], None] = lambda _: None,
                   lora_rank: int | None = None, model: str = "local") -> Iterator[LocalEndpoint]:
    """A built-in model's endpoint (`model`: "local", the embedded one, or "local-moe"): a running
    `prime serve` (any one for "local"; one serving that model for the others), else a server started
    and stopped here. With `lora_rank`, the server must load adapters up to that rank at run time: one
    started here gets LoRA enabled; a running one without it raises ServeError saying how to start it."""
    name = served_name(model)
    for record in running_servers():
        if model != "local" and name not in record["models"]:
            continue
        if lora_rank is not None and (problem := _lora_problem(record, lora_rank, model)):
            raise ServeError(problem)
        status(f"using the local server at {record['url']} (pid {record['pid']})")
        yield LocalEndpoint(record["url"], record["models"][0], record["pid"], started_here=False,
                            model_path=record.get("model_path"))
        return
    model_path = builtin_folder(model, status)
    options = ServerOptions(model_path=model_path, served_names=[name], port=free_port())
    if lora_rank is not None:
        options.enable_lora, options.max_lora_rank = True, vllm_lora_rank(lora_rank)
    log_path = logs_dir() / f"vllm-{options.port}.log"
    server = VllmServer(options, log_path)
    with_lora = " with runtime LoRA loading" if lora_rank is not None else ""
    status(f"starting vLLM for {name}{with_lora} on port {options.port} (stopped when the run ends; "
           f"`prime serve` keeps one running; log: {log_path})")
    server.start()
    try:
        started = time.monotonic()
        server.wait_ready(tick)
        status(f"vLLM ready in {time.monotonic() - started:.0f} s")
        yield LocalEndpoint(options.url, name, server.pid, started_here=True, model_path=str(model_path))
    finally:
        server.stop()
