"""`prime train` over several inference servers (orchestrator.client.base_url), through the installed script:
the real launcher, orchestrator and trainer on a tiny model, two scripted servers in vLLM's place."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prime_cli.serve.server import free_port
from tests.support.scripted_server import ScriptedOpenAIServer

from .train_runs import TrainProcess, run_train, write_workspace


def client_section(*urls: str) -> str:
    return "\n[orchestrator.client]\nbase_url = [" + ", ".join(json.dumps(u) for u in urls) + "]\n"


def loads(server: ScriptedOpenAIServer) -> list[str]:
    """The adapter folders the server was asked to load, in order."""
    return [Path(r["json"]["lora_path"]).name for r in server.requests_to("/v1/load_lora_adapter")]


def chats(server: ScriptedOpenAIServer) -> int:
    return len(server.requests_to("/v1/chat/completions"))


def test_two_servers_both_sample_and_both_load_every_adapter(tmp_path, model):
    with ScriptedOpenAIServer(token_ids=True) as a, ScriptedOpenAIServer(token_ids=True) as b:
        config = write_workspace(tmp_path, model, max_steps=3, extra=client_section(a.url, b.url))
        done = run_train([str(config)], tmp_path)
        assert done.returncode == 0, done.stderr
        assert chats(a) > 0 and chats(b) > 0, (chats(a), chats(b))
        assert loads(a) == loads(b) and loads(a)[0] == "step_0" and len(loads(a)) >= 2
    assert "vLLM ready" not in done.stderr  # no server was started: the config named them
    out = tmp_path / "outputs" / "rl" / "flaky-reward"
    assert not (out / "logs" / "inference.log").exists()


def test_killing_one_server_mid_run_leaves_the_run_going_with_one_line(tmp_path, model):
    with ScriptedOpenAIServer(token_ids=True) as a, ScriptedOpenAIServer(token_ids=True, delay=0.05) as b:
        config = write_workspace(tmp_path, model, max_steps=6, extra=client_section(a.url, b.url))
        out = tmp_path / "outputs" / "rl" / "flaky-reward"
        run = TrainProcess([str(config)], tmp_path)
        run.wait_for(lambda: (out / "weights" / "step_2").is_dir() and chats(b) > 0, timeout=150)
        b.stop()
        code, err = run.finish(timeout=240)
        assert code == 0, err
        served_after = chats(a)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3, 4, 5, 6] and all(r["effective_batch_size"] == 8 for r in rows)
    lines = [line for line in err.splitlines() if line.startswith(f"inference server {b.url} failed")]
    assert len(lines) == 1 and "its groups go to the 1 other server" in lines[0], err
    # the surviving server kept loading the new adapters (step 6's batch needs weights of step 4 or newer)
    assert max(int(name.split("_")[1]) for name in loads(a)) >= 4 and served_after > 0


def test_every_server_down_stops_the_run_with_the_resume_command(tmp_path, model):
    with ScriptedOpenAIServer(token_ids=True) as a, ScriptedOpenAIServer(token_ids=True) as b:
        config = write_workspace(tmp_path, model, max_steps=8, extra=client_section(a.url, b.url))
        out = tmp_path / "outputs" / "rl" / "flaky-reward"
        run = TrainProcess([str(config)], tmp_path)
        run.wait_for(lambda: (out / "checkpoints" / "step_2").is_dir(), timeout=150)
        a.stop()
        b.stop()
        code, err = run.finish(timeout=240)
    assert code == 1, err
    assert "every inference server failed" in err and "--resume-step" in err, err[-2000:]


def test_an_unreachable_server_is_one_line_and_exit_2_before_anything_starts(tmp_path, model):
    with ScriptedOpenAIServer(token_ids=True) as a:
        dead = f"http://127.0.0.1:{free_port()}/v1"
        config = write_workspace(tmp_path, model, extra=client_section(a.url, dead))
        done = run_train([str(config)], tmp_path)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and dead in lines[0] and "--part inference" in lines[0]
    assert not (tmp_path / "outputs" / "rl").exists()  # nothing was prepared


@pytest.mark.parametrize(("value", "named"), [("[]", "empty list"), ('["ftp://x"]', "not an http(s) URL"),
                                              ('["http://a:1/v1", "http://a:1/v1"]', "twice")])
def test_bad_base_urls_are_one_line_and_exit_2(tmp_path, model, value, named):
    config = write_workspace(tmp_path, model, extra=f"\n[orchestrator.client]\nbase_url = {value}\n")
    done = run_train([str(config), "--dry-run"], tmp_path)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "orchestrator.client.base_url" in lines[0] and named in lines[0], done.stderr


def test_a_server_that_cannot_load_the_first_adapter_stops_the_run_naming_the_path(tmp_path, model):
    """Every server loads adapters from output_dir: the first load (step 0) goes to all of them, and one that
    refuses it (as a vLLM on a node that does not see the folder would) stops the run at once."""
    with ScriptedOpenAIServer(token_ids=True) as a, ScriptedOpenAIServer(token_ids=True, lora_loads=0) as b:
        config = write_workspace(tmp_path, model, max_steps=3, extra=client_section(a.url, b.url))
        done = run_train([str(config)], tmp_path)
    out = tmp_path / "outputs" / "rl" / "flaky-reward"
    assert done.returncode == 1, done.stderr
    assert "must see that folder at the same path" in done.stderr and f"the server at {b.url}" in done.stderr
    assert str(out / "weights" / "step_0") in done.stderr
    assert not (out / "rollouts" / "step_1" / "batch.jsonl").exists()  # nothing was sampled
