"""The trainer on two "nodes": two torchrun agents on 127.0.0.1 meeting at a c10d rendezvous (gloo on
CPU), started with the launcher's own command, take the same steps as one process."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from lora_tiny import make_group_samples, make_samples, tiny_config, tiny_model, write_batch  # noqa: E402
from test_trainer_distributed import adapter, assert_same  # noqa: E402

from prime_cli.serve.server import free_port  # noqa: E402
from prime_lora.launcher import trainer_command  # noqa: E402
from prime_lora.trainer.loop import train  # noqa: E402

REPO = Path(__file__).resolve().parents[3]


def test_two_nodes_of_one_rank_match_one_process(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    model_path = tiny_model(tmp_path / "tiny")
    single, nodes = tmp_path / "single", tmp_path / "nodes"
    overrides = {"trainer.micro_batch_size": 2, "trainer.model.lora.dropout": 0.0}
    for out in (single, nodes):
        for step in (1, 2):
            write_batch(out, step, make_group_samples(40 + step, groups=1, per_group=3) + make_samples(50 + step, count=2))
    train(tiny_config(single, **overrides), single, model_path, None)
    deployment = {"deployment.type": "multi_node", "deployment.num_train_nodes": 2,
                  "deployment.rdzv_endpoint": f"127.0.0.1:{free_port()}"}
    config = tiny_config(nodes, **overrides, **deployment)
    (nodes / "config.json").write_text(config.model_dump_json())
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    agents = []
    for rank in (0, 1):
        command = trainer_command(config, nodes / "config.json", None, node_rank=rank) + ["--model-path", model_path]
        assert "--nnodes=2" in command and f"--node-rank={rank}" in command and "--rdzv-backend=c10d" in command
        agents.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outputs = [agent.communicate(timeout=600) for agent in agents]
    for agent, (_, err) in zip(agents, outputs, strict=True):
        assert agent.returncode == 0, err[-3000:]
    assert any("2 data-parallel ranks" in out for out, _ in outputs)
    for step in (1, 2):
        assert_same(adapter(single, step), adapter(nodes, step))
    assert len((nodes / "metrics.jsonl").read_text().splitlines()) == 2  # written once, by rank 0
