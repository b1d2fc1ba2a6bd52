"""`prime train CONFIG --part ...`: each part started alone, as on its own node, through the installed script
(the scripted server in vLLM's place for the inference part; tests/train/train_runs.py)."""

from __future__ import annotations

import json
import os
import re
import signal

import pytest

from prime_cli.serve.server import free_port, served_models

from .train_runs import TrainProcess, run_train, write_workspace


def test_inference_two_trainer_nodes_and_the_orchestrator_started_apart_make_one_run(tmp_path, model):
    port, rdzv = free_port(), free_port()
    extra = f"""
        [orchestrator.client]
        base_url = "http://127.0.0.1:{port}/v1"

        [deployment]
        type = "multi_node"
        num_train_nodes = 2
        rdzv_endpoint = "127.0.0.1:{rdzv}"
        """
    config = write_workspace(tmp_path, model, max_steps=3, extra=extra)
    out = tmp_path / "outputs" / "rl" / "flaky-reward"
    inference = TrainProcess([str(config), "--part", "inference", "--set", f"inference.port={port}"], tmp_path)
    try:
        inference.wait_for(lambda: served_models(f"http://127.0.0.1:{port}/v1") is not None, timeout=60)
        node1 = TrainProcess([str(config), "--part", "trainer", "--node-rank", "1"], tmp_path)
        node0 = TrainProcess([str(config), "--part", "trainer"], tmp_path)
        orchestrator = TrainProcess([str(config), "--part", "orchestrator"], tmp_path)
        results = {name: part.finish(timeout=300) for name, part in
                   (("node0", node0), ("node1", node1), ("orchestrator", orchestrator))}
    finally:
        os.killpg(inference.proc.pid, signal.SIGINT)
    code, inference_err = inference.finish(timeout=60)
    for name, (code_, err) in results.items():
        assert code_ == 0, f"{name}: {err[-3000:]}"
    assert code == 130 and re.search(rf"inference ready: http://127\.0\.0\.1:{port}/v1", inference_err), inference_err
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]  # written once (rank 0 of the two nodes)
    assert "2 data-parallel ranks" in (out / "logs" / "trainer.log").read_text()
    assert (out / "logs" / "trainer_node1.log").stat().st_size > 0
    assert (out / "weights" / "step_3" / "adapter_model.safetensors").exists()
    assert "training done" in results["node0"][1]


@pytest.mark.parametrize(("args", "named"), [
    (["--part", "bogus"], "--part bogus: choose one of inference, trainer, orchestrator"),
    (["--part", "orchestrator"], "orchestrator.client.base_url"),
    (["--node-rank", "1"], "--node-rank 1 is for --part trainer"),
    (["--part", "inference", "--force"], "--force belongs to the trainer part"),
])
def test_bad_part_flags_are_one_line_and_exit_2(tmp_path, model, args, named):
    config = write_workspace(tmp_path, model)
    done = run_train([str(config), *args], tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and named in lines[0], done.stderr
    assert not (tmp_path / "outputs").exists()


def test_several_trainer_nodes_without_parts_is_refused_before_anything_starts(tmp_path, model):
    extra = """
        [deployment]
        type = "multi_node"
        num_train_nodes = 2
        rdzv_endpoint = "127.0.0.1:29511"
        """
    done = run_train([str(write_workspace(tmp_path, model, extra=extra))], tmp_path)
    assert done.returncode == 2
    assert "start each part on its node with --part" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    missing = run_train([str(write_workspace(tmp_path, model, extra=extra.replace('rdzv_endpoint = "127.0.0.1:29511"', "")))],
                        tmp_path)
    assert missing.returncode == 2 and "deployment.rdzv_endpoint" in missing.stderr


@pytest.mark.parametrize(("extra", "named"), [
    ('[deployment]\nnum_train_nodes = 2\nrdzv_endpoint = "h:1"\n', 'need deployment.type = "multi_node"'),
    ('[deployment]\ntype = "multi_node"\nrdzv_endpoint = "no-port"\n', "is not HOST:PORT"),
    ('trainer_gpu_ids = [0, 1, 2]\n[deployment]\ngpus_per_node = 2\n', "beyond deployment.gpus_per_node"),
    ('[orchestrator.client]\nbase_url = "http://a:1/v1"\n[deployment]\ntype = "multi_node"\nnum_infer_nodes = 2\n',
     "num_infer_nodes is 2 but orchestrator.client.base_url names 1 server"),
    ('[slurm]\nrdzv_port = 0\n', "slurm.rdzv_port"),
    ('[slurm]\nqueue = "x"\n', "slurm.queue"),
])
def test_bad_scaling_keys_are_one_line_and_exit_2_before_anything_starts(tmp_path, model, extra, named):
    config = write_workspace(tmp_path, model)
    text = config.read_text()
    if extra.startswith("trainer_gpu_ids"):  # a top-level key goes before the first table
        first, rest = extra.split("\n", 1)
        text, extra = first + "\n" + text, rest
    config.write_text(text + "\n" + extra)
    done = run_train([str(config), "--dry-run"], tmp_path)
    assert done.returncode == 2, done.stdout[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and named in lines[0], done.stderr
    assert not (tmp_path / "outputs").exists()
