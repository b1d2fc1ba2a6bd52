"""One real vLLM server with the embedded SmolLM2 for the whole session, started by `prime serve`.

The tests use their own PRIME_CACHE_DIR (so a developer's running servers are not picked up) whose
`models/` links to the real model cache (so the one-time conversion is shared with `make demo`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from prime_cli.serve.paths import models_dir
from prime_cli.serve.server import free_port
from tests.evals.cli_support import prime_env

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 900  # includes the one-time GGUF conversion on a fresh machine

if importlib.util.find_spec("vllm") is None:
    pytest.skip("vLLM is not installed (make setup installs it)", allow_module_level=True)


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def prime_cache(tmp_path_factory) -> Path:
    cache = tmp_path_factory.mktemp("prime-cache")
    real_models = models_dir()
    real_models.mkdir(parents=True, exist_ok=True)
    (cache / "models").symlink_to(real_models, target_is_directory=True)
    return cache


class ServeProcess:
    def __init__(self, cache: Path, extra_args: list[str] | None = None):
        self.cache = cache
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.proc = subprocess.Popen([sys.executable, "-m", "prime_cli", "serve", "--port", str(self.port),
                                      *(extra_args or [])],
                                     cwd=REPO, env=prime_env({"PRIME_CACHE_DIR": str(cache)}),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.stderr: list[str] = []
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines.put), daemon=True).start()
        threading.Thread(target=self._pump, args=(self.proc.stderr, self.stderr.append), daemon=True).start()

    @staticmethod
    def _pump(stream, sink):
        for line in stream:
            sink(line)

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=1)
            except queue.Empty:
                if self.proc.poll() is not None:
                    break
                continue
            if line.strip() == self.url:
                return
        self.proc.kill()
        raise RuntimeError(f"prime serve did not become ready: {''.join(self.stderr)[-3000:]}")

    def record(self) -> dict:
        return json.loads((self.cache / "servers" / f"{self.port}.json").read_text())

    def interrupt(self, timeout: float = 60) -> int:
        self.proc.send_signal(signal.SIGINT)
        return self.proc.wait(timeout=timeout)


@pytest.fixture(scope="session")
def local_server(prime_cache) -> ServeProcess:
    server = ServeProcess(prime_cache)
    server.wait_ready()
    yield server
    if server.proc.poll() is None:
        server.interrupt()


def run_eval(args: list[str], cache: Path, extra_env: dict[str, str] | None = None, timeout: float = 600):
    env = prime_env({"PRIME_CACHE_DIR": str(cache), **(extra_env or {})})
    return subprocess.run([sys.executable, "-m", "prime_cli", "eval", "run", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


def shared_data_dir() -> Path:
    shared = REPO.parent / "shared" / "data"
    return shared if shared.is_dir() else REPO / "tests" / "data"


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
