"""`-m local` finds the server `prime serve` recorded; stale records are dropped; `prime serve` reuses."""

import json
import os
from pathlib import Path

import pytest

from prime_cli.serve import api, local
from prime_cli.serve.errors import ServeError
from prime_cli.serve.server import ServerOptions, free_port
from tests.evals.cli_support import only_run_dir, read_rows, run_prime
from tests.support.scripted_server import ScriptedOpenAIServer

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIME_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def record(server, name="SmolLM2-135M-Instruct", pid=None):
    port = int(server.url.rsplit(":", 1)[1].split("/")[0])
    opts = ServerOptions(model_path=Path("/models/x"), served_names=[name], port=port)
    return local.record_server(opts, pid or os.getpid())


def test_a_recorded_live_server_is_used_without_starting_one(cache):
    with ScriptedOpenAIServer(models=["SmolLM2-135M-Instruct"]) as server:
        record(server)
        messages = []
        with local.local_endpoint(messages.append) as endpoint:
            assert (endpoint.url, endpoint.model, endpoint.started_here) == (server.url, "SmolLM2-135M-Instruct", False)
        assert "using the local server" in messages[0]


def test_records_of_dead_processes_or_silent_ports_are_pruned(cache):
    with ScriptedOpenAIServer() as server:
        dead = record(server, pid=2**22 + 12345)  # no such process
    opts = ServerOptions(model_path=Path("/m"), served_names=["x"], port=free_port())
    silent = local.record_server(opts, os.getpid())
    assert local.running_servers() == []
    assert not dead.exists() and not silent.exists()


def test_the_embedded_model_is_preferred_over_other_recorded_servers(cache):
    with ScriptedOpenAIServer() as other, ScriptedOpenAIServer() as smol:
        record(other, name="my-finetune")
        record(smol)
        assert [r["models"][0] for r in local.running_servers()] == ["SmolLM2-135M-Instruct", "my-finetune"]


def test_eval_with_the_default_model_uses_the_recorded_server(cache, tmp_path):
    with ScriptedOpenAIServer(models=["SmolLM2-135M-Instruct"]) as server:
        record(server)
        out = tmp_path / "runs"
        done = run_prime(["eval", "run", "reverse-text", "-n", "2", "-r", "2", "-s", "-o", str(out)], cwd=REPO,
                         extra_env={"PRIME_CACHE_DIR": str(cache)})
        assert done.returncode == 0, done.stderr
        assert f"using the local server at {server.url}" in done.stderr
        assert {r["json"]["model"] for r in server.requests_to("/v1/chat/completions")} == {"SmolLM2-135M-Instruct"}
    run_dir = only_run_dir(out)
    metadata = json.loads((run_dir / "metadata.json").read_text())
    assert metadata["model"] == "SmolLM2-135M-Instruct" and metadata["base_url"] == server.url
    assert len(read_rows(run_dir)) == 4


def test_prime_serve_reuses_a_server_already_serving_the_same_model(cache):
    with ScriptedOpenAIServer(models=["SmolLM2-135M-Instruct"]) as server:
        record(server)
        port = int(server.url.rsplit(":", 1)[1].split("/")[0])
        opts = ServerOptions(model_path=Path("/m"), served_names=["SmolLM2-135M-Instruct"], port=port)
        seen = []
        code = api.serve(opts, lambda _: None, lambda _: None, lambda o, pid, reused: seen.append((o.port, pid, reused)))
        assert code == 0 and seen == [(port, os.getpid(), True)]


def test_prime_serve_names_what_holds_a_busy_port(cache):
    with ScriptedOpenAIServer(models=["someone-else"]) as server:
        port = int(server.url.rsplit(":", 1)[1].split("/")[0])
        opts = ServerOptions(model_path=Path("/m"), served_names=["SmolLM2-135M-Instruct"], port=port)
        with pytest.raises(ServeError, match=f"port {port} is in use by a server for someone-else; pick a free one with --port"):
            api.serve(opts, lambda _: None, lambda _: None, lambda *a: None)


def test_prime_serve_bad_model_folder_is_one_line_exit_2(tmp_path):
    done = run_prime(["serve", str(tmp_path)], cwd=REPO)
    assert done.returncode == 2
    assert done.stderr.strip() == f"error: {tmp_path} is not a model folder: it has no config.json (save one with transformers' save_pretrained)"


def test_with_a_lora_rank_and_no_server_running_one_is_started_with_runtime_lora(cache, monkeypatch):
    """The checkpoint sweep's `-m local` with nothing running: vLLM starts with --enable-lora at a rank vLLM takes."""
    started = []

    class FakeVllm:
        def __init__(self, options, log):
            self.options, self.pid = options, 4242
            started.append(self)

        def start(self):
            self.running = True

        def wait_ready(self, tick):
            pass

        def stop(self):
            self.running = False

    monkeypatch.setattr(local, "VllmServer", FakeVllm)
    monkeypatch.setattr(local, "builtin_folder", lambda name, status: Path("/models/smollm2"))
    messages = []
    with local.local_endpoint(messages.append, lora_rank=8) as endpoint:
        assert endpoint.started_here and started[0].running
    (server,) = started
    assert server.options.enable_lora and server.options.max_lora_rank == local.vllm_lora_rank(8) >= 8
    assert not server.running  # stopped with the run
    assert any("with runtime LoRA loading" in m for m in messages)


def test_local_moe_uses_only_a_server_of_that_model_else_starts_its_own(cache, monkeypatch):
    """`-m local` takes any running `prime serve`; `-m local-moe` only one serving the MoE."""
    from prime_cli.serve.local_moe import LOCAL_MOE_NAME

    started = []

    class FakeVllm:
        def __init__(self, options, log):
            self.options, self.pid = options, 4243
            started.append(options)

        def start(self):
            pass

        def wait_ready(self, tick):
            pass

        def stop(self):
            pass

    monkeypatch.setattr(local, "VllmServer", FakeVllm)
    monkeypatch.setattr(local, "builtin_folder", lambda name, status: Path(f"/models/{name}"))
    with ScriptedOpenAIServer(models=["SmolLM2-135M-Instruct"]) as smol:
        record(smol)
        with local.local_endpoint(model="local-moe") as endpoint:
            assert endpoint.started_here and endpoint.model == LOCAL_MOE_NAME
        assert started[0].model_path == Path("/models/local-moe") and started[0].served_names == [LOCAL_MOE_NAME]
        with ScriptedOpenAIServer(models=[LOCAL_MOE_NAME]) as moe:
            record(moe, name=LOCAL_MOE_NAME)
            with local.local_endpoint(model="local-moe") as endpoint:
                assert (endpoint.url, endpoint.started_here) == (moe.url, False)
            with local.local_endpoint() as endpoint:
                assert endpoint.url == smol.url


def test_eval_with_local_moe_uses_its_server_and_resumes_with_it(cache, tmp_path):
    from prime_cli.serve.local_moe import LOCAL_MOE_NAME

    with ScriptedOpenAIServer(models=[LOCAL_MOE_NAME]) as server:
        record(server, name=LOCAL_MOE_NAME)
        out = tmp_path / "runs"
        done = run_prime(["eval", "run", "reverse-text", "-m", "local-moe", "-n", "2", "-r", "1", "-s", "-o", str(out)],
                         cwd=REPO, extra_env={"PRIME_CACHE_DIR": str(cache)})
        assert done.returncode == 0, done.stderr
        assert {r["json"]["model"] for r in server.requests_to("/v1/chat/completions")} == {LOCAL_MOE_NAME}
        run_dir = only_run_dir(out)
        metadata = json.loads((run_dir / "metadata.json").read_text())
        assert metadata["model"] == LOCAL_MOE_NAME and metadata["local_model"]
        # the run is known as a local-moe run: -R with -m local-moe continues it, -m local is refused
        resumed = run_prime(["eval", "run", "reverse-text", "-R", str(run_dir), "-m", "local-moe"], cwd=REPO,
                            extra_env={"PRIME_CACHE_DIR": str(cache)})
        assert resumed.returncode == 0, resumed.stderr
        refused = run_prime(["eval", "run", "reverse-text", "-R", str(run_dir), "-m", "local"], cwd=REPO,
                            extra_env={"PRIME_CACHE_DIR": str(cache)})
        assert refused.returncode == 2 and "not 'local'" in refused.stderr


def test_a_server_started_with_an_adapter_is_recorded_as_taking_runtime_lora(cache):
    """`prime serve local-moe --lora trained=...` runs vLLM with --enable-lora: the checkpoint sweep may use it."""
    with ScriptedOpenAIServer(models=["SmolLM2-4x135M-Instruct"]) as server:
        port = int(server.url.rsplit(":", 1)[1].split("/")[0])
        opts = ServerOptions(model_path=Path("/m"), served_names=["SmolLM2-4x135M-Instruct"], port=port,
                             loras={"trained": Path("/adapters/step_20")}, max_lora_rank=16)
        local.record_server(opts, os.getpid())
        with local.local_endpoint(lora_rank=16, model="local-moe") as endpoint:
            assert endpoint.url == server.url


def test_the_fix_for_a_server_without_lora_starts_the_same_model(cache):
    with ScriptedOpenAIServer(models=["SmolLM2-4x135M-Instruct"]) as server:
        record(server, name="SmolLM2-4x135M-Instruct")
        with pytest.raises(ServeError, match=r"run `prime serve local-moe --enable-lora --max-lora-rank 16`"):
            with local.local_endpoint(lora_rank=16, model="local-moe"):
                pass
