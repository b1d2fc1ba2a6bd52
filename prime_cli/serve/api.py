"""`prime serve`: run one vLLM server in the foreground until Ctrl-C, recorded for `-m local`."""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from .builtin_models import builtin_folder, is_builtin
from .builtin_models import served_name as builtin_served_name
from .embedded import EMBEDDED_NAME, ensure_embedded_model
from .errors import ServeError, ServerDied
from .local import forget_server, record_server, running_servers
from .model_dir import check_model_dir
from .paths import logs_dir
from .server import ServerOptions, VllmServer, port_in_use, served_models

Status = Callable[[str], None]


def model_to_serve(model: str | None, served_name: str | None, status: Status) -> tuple[Path, list[str]]:
    """The folder `prime serve` serves (the embedded model when none is given; a built-in one by its
    name, `local` or `local-moe`, unless a folder of that name is here) and its served names."""
    if model is None:
        return ensure_embedded_model(status), [served_name or EMBEDDED_NAME]
    path = Path(model).expanduser()
    if is_builtin(model) and not path.is_dir():
        return builtin_folder(model, status), [served_name or builtin_served_name(model)]
    check_model_dir(path)
    return path.resolve(), [served_name or path.resolve().name]


def already_serving(options: ServerOptions) -> dict | None:
    """The recorded server on this port when it serves the same model (then we reuse it)."""
    for record in running_servers():
        if record["port"] == options.port and record["models"] == options.served_names:
            return record
    return None


def serve(options: ServerOptions, status: Status, tick: Callable[[float], None],
          on_ready: Callable[[ServerOptions, int | None, bool], None]) -> int:
    """Serve until interrupted. Returns the exit code (0 after Ctrl-C, 1 if vLLM died)."""
    reused = already_serving(options)
    if reused:
        on_ready(replace(options, port=reused["port"]), reused["pid"], True)
        return 0
    if port_in_use(options.host, options.port):
        other = served_models(options.url)
        what = f"a server for {', '.join(other)}" if other else "another program"
        raise ServeError(f"port {options.port} is in use by {what}; pick a free one with --port")
    server = VllmServer(options, logs_dir() / f"vllm-{options.port}.log")
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    # a shell starting us in the background ignores SIGINT; `kill -INT` must still stop vLLM
    previous_int = signal.signal(signal.SIGINT, _raise_interrupt)
    try:
        server.start()
        started = time.monotonic()
        server.wait_ready(tick)
        assert server.pid is not None
        record_server(options, server.pid)
        status(f"ready in {time.monotonic() - started:.0f} s")
        on_ready(options, server.pid, False)
        while server.process is not None and server.process.poll() is None:
            time.sleep(0.5)
        raise ServerDied(f"vLLM stopped unexpectedly (code {server.process.returncode}). "
                         f"Last lines of {server.log_path}:\n{server.log_tail()}")
    except KeyboardInterrupt:
        status("stopping vLLM")
        return 0
    finally:
        forget_server(options.port)
        server.stop()
        with contextlib.suppress(ValueError):
            signal.signal(signal.SIGTERM, previous)
            signal.signal(signal.SIGINT, previous_int)


def _raise_interrupt(signum, frame):  # noqa: ARG001
    raise KeyboardInterrupt
