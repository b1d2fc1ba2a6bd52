"""The command lines of the trainer part (plain, FSDP on one node, or one node of several) and the orchestrator."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from prime_cli.train.plugin_api import RLConfig

from .devices import has_cuda


def trainer_command(config: RLConfig, config_path: Path, resume_step: int | None, node_rank: int = 0) -> list[str]:
    module = ["-m", "prime_lora.trainer", "--config", str(config_path)]
    if resume_step is not None:
        module += ["--resume-step", str(resume_step)]
    per_node = len(config.trainer_gpu_ids) if has_cuda() else 1  # FSDP: one process per trainer GPU
    nodes = config.deployment.num_train_nodes
    if nodes > 1:  # this node's agent of torchrun's c10d rendezvous (the same id on every node: the run's folder)
        run_id = hashlib.sha1(str(config_path.parent.resolve()).encode()).hexdigest()[:16]
        return [sys.executable, "-m", "torch.distributed.run", f"--nnodes={nodes}", f"--node-rank={node_rank}",
                "--rdzv-backend=c10d", f"--rdzv-endpoint={config.deployment.rdzv_endpoint}", f"--rdzv-id={run_id}",
                f"--nproc-per-node={per_node}", *module]
    if per_node > 1:
        return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={per_node}", *module]
    return [sys.executable, *module]


def orchestrator_command(config_path: Path, base_urls: list[str], resume_step: int | None) -> list[str]:
    command = [sys.executable, "-m", "prime_lora.orchestrator", "--config", str(config_path)]
    for url in base_urls:
        command += ["--base-url", url]
    return command + (["--resume-step", str(resume_step)] if resume_step is not None else [])
