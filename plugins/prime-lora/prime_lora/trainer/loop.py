"""The trainer's loop: ask its batch source for batch N, take one step, publish weights/step_N, log the step."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from prime_cli.train.plugin_api import (
    JsonLinesAppender,
    RLConfig,
    TrainingRunLayout,
    adapter_path,
    read_evals,
)

from . import wandb_run
from .batch_source import BatchSource, FileBatches, say_now
from .checkpoint import load_checkpoint, prune_weights, save_checkpoint, save_weights
from .distributed import Dist
from .fsdp import shard_model, shard_options
from .logprobs import LossPositionLogprobs
from .model import build_policy, describe_adapters, pick_device, pick_dtype, trainable_parameters
from .optim import apply_optim_config, build_optimizer, build_scheduler
from .step import StepResult, train_step
from .wandb_extras import extras_payload

POLL_S = 0.1


# The names the prime-rl guide tells users to watch, written beside our own keys (which stay, so that
# readers of older runs keep working). policy/kl is mismatch_kl: the k3 estimate of KL(inference||train).
GUIDE_NAMES = {"reward/mean": "reward_mean", "reward/std": "reward_std",
               "policy/entropy": "entropy", "policy/kl": "mismatch_kl"}


def with_guide_names(row: dict[str, Any]) -> dict[str, Any]:
    """`row` plus each guide name whose source key it holds."""
    return {**row, **{guide: row[ours] for guide, ours in GUIDE_NAMES.items() if ours in row}}


def wandb_metrics(row: dict[str, Any], batch_keys: Any = ()) -> dict[str, float]:
    """The numbers of a metrics row as W&B charts them: the guide's names and eval/* as they are, ours under
    `orchestrator/` (the batch's stats) or `trainer/`, which W&B shows as sections."""
    metrics = {}
    for key, value in row.items():
        if key == "step" or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if key in GUIDE_NAMES or key.startswith("eval/"):
            metrics[key] = value
        else:
            metrics[f"{'orchestrator' if key in batch_keys else 'trainer'}/{key}"] = value
    return metrics


def eval_keys(line: dict[str, Any]) -> dict[str, Any]:
    """The metrics of one evals.jsonl line, with the step it evaluated as `eval/step` (W&B's x axis for eval/*)."""
    return {**{k: v for k, v in line.items() if k.startswith("eval/")},
            "eval/step": line["step"], "eval/policy_step": line.get("policy_step", line["step"])}


class MetricsLog:
    """metrics.jsonl, plus W&B when configured and installed (see wandb_run). The online evals the orchestrator
    finished (evals.jsonl) join the next rows, tagged with the step they evaluated (`eval/step`)."""

    def __init__(self, output_dir: Path, config: RLConfig):
        self.path = TrainingRunLayout(output_dir).metrics_path
        self.evals_path = TrainingRunLayout(output_dir).evals_path
        self.evals_seen = len(read_evals(self.evals_path))  # a resumed run's earlier evals were logged then
        self.wandb = wandb_run.start(config, output_dir)
        self.output_dir = output_dir
        # opened with the first row: metrics.jsonl exists once a step trained (a fresh start reads it so)
        self.appender: JsonLinesAppender | None = None
        self.logs_extras = config.wandb is not None and config.wandb.log_extras is not None
        if self.wandb is not None and config.orchestrator.eval is not None:  # eval curves against the step evaluated
            self.wandb.define_metric("eval/step")
            self.wandb.define_metric("eval/*", step_metric="eval/step")

    def wait_for_eval(self, step: int) -> None:
        """Until evals.jsonl has the eval of `step` (the last step's: its adapter is written just now)."""
        while not any(line["step"] == step for line in read_evals(self.evals_path)):
            time.sleep(POLL_S)

    def write(self, row: dict[str, Any], last: bool = False, batch_keys: Any = ()) -> None:
        """Append one step's row with the oldest eval not logged yet (one per row, so that two evals ending
        between two rows both get one); the last row takes the newest, the run's final eval."""
        lines = read_evals(self.evals_path)
        if len(lines) > self.evals_seen:
            pick = len(lines) - 1 if last else self.evals_seen
            row = {**row, **eval_keys(lines[pick])}
            self.evals_seen = len(lines) if last else pick + 1
        row = with_guide_names(row)
        if self.appender is None:  # a resumed run killed mid-write: its torn last row is cut away first
            self.appender = JsonLinesAppender(self.path)
        self.appender.append(row)
        if self.wandb is not None:
            extras = extras_payload(self.output_dir, row["step"]) if self.logs_extras else {}
            self.wandb.log({**wandb_metrics(row, batch_keys), **extras}, step=row["step"])

    def close(self) -> None:
        if self.appender is not None:
            self.appender.close()
            self.appender = None
        wandb_run.finish(self.wandb)
        self.wandb = None


def train(config: RLConfig, output_dir: Path, model_path: str, resume_step: int | None, dist: Dist = Dist(),
          batches: BatchSource | None = None) -> int:
    """`batches`: the orchestrator's files in output_dir by default (FileBatches: no time limit)."""
    if batches is None:  # one rank says what it waits for
        batches = FileBatches(output_dir, say=say_now if dist.is_main else None)
    device = pick_device()
    dtype = pick_dtype(config, device)
    # sharded: built on the CPU, FSDP moves each rank's shards to its device
    start = resume_step or 0
    # a resume's checkpoint holds the adapter as trained so far: [model] adapter is only the first step's
    model = build_policy(config, model_path, torch.device("cpu") if dist.sharded else device, dtype,
                         initial_adapter=not start)
    policy = LossPositionLogprobs(model)
    if dist.sharded:
        shard_model(policy, dist.world, device, config.trainer.model.reshard_after_forward,
                    shard_options(config.trainer.model, dtype))
    params = trainable_parameters(model)
    optimizer = build_optimizer(params, config)
    scheduler = build_scheduler(optimizer, config)
    pad_id = model.config.pad_token_id if model.config.pad_token_id is not None else 0
    if start:
        load_checkpoint(model, optimizer, scheduler, output_dir, start, dist.rank)
        apply_optim_config(optimizer, scheduler, config)
        print(f"resumed from {TrainingRunLayout(output_dir).checkpoint_dir(start)}", flush=True)
    else:
        save_weights(model, output_dir, 0, dist=dist)
    if dist.is_main:
        print(f"trainer ready on {device.type} ({dtype}), {sum(p.numel() for p in params):,} trainable parameters"
              f"{f', {dist.world} data-parallel ranks' if dist.world > 1 else ''}"
              f"{' (FSDP2: base model sharded)' if dist.sharded else ''}", flush=True)
        print(f"trainer: LoRA adapters on {describe_adapters(model)}", flush=True)
        if config.model.adapter is not None and not start:
            print(f"trainer: starting from the adapter {adapter_path(config)} (model.adapter)", flush=True)
    metrics = MetricsLog(output_dir, config) if dist.is_main else None
    online_eval = config.orchestrator.eval
    eval_steps = set(online_eval.steps(config.max_steps, start)) if online_eval is not None else set()
    step_ended = time.perf_counter()
    for step in range(start + 1, config.max_steps + 1):
        batch = batches.next_batch(step)
        result = train_step(policy, optimizer, scheduler, params, batch.samples, config, device, pad_id, dist)
        save_started = time.perf_counter()
        checkpoint_step = step % config.trainer.ckpt.interval == 0 or step == config.max_steps
        save_weights(model, output_dir, step, merged=config.trainer.save_merged and checkpoint_step,
                     model_path=model_path, dist=dist)
        if checkpoint_step:
            save_checkpoint(model, optimizer, scheduler, output_dir, step, config.trainer.ckpt, dist)
        if dist.is_main:
            prune_weights(output_dir, config.orchestrator.max_async_level, keep=eval_steps)
        save_s = time.perf_counter() - save_started
        if metrics is None:
            continue
        now = time.perf_counter()
        row = {**batch.stats, "step": step, **result.as_metrics(), "lr": scheduler.get_last_lr()[0],
               "wait_batch_s": batch.waited_s, "save_s": save_s, "step_s": now - step_ended}
        step_ended = now
        if step == config.max_steps and config.max_steps in eval_steps:
            metrics.wait_for_eval(step)  # so that the last row holds the final eval
        metrics.write(row, last=step == config.max_steps, batch_keys=batch.stats.keys())
        flag = (" (skipped: non-finite)" if result.skipped else
                " (no optimizer step: every advantage is 0)" if result.zero_advantage else "")
        print(step_line(step, result, flag), flush=True)
    if metrics is not None:
        metrics.close()
    return 0


def step_line(step: int, result: StepResult, flag: str = "") -> str:
    """The step's line in logs/trainer.log (SFT: its loss is the mean negative log-likelihood)."""
    if result.sft:
        return (f"step {step}: loss {result.loss:.4f} nll {result.loss:.4f} grad_norm {result.grad_norm:.3f} "
                f"train {result.train_s:.1f}s{flag}")
    return (f"step {step}: loss {result.loss:.4f} grad_norm {result.grad_norm:.3f} "
            f"mismatch_kl {result.mismatch_kl:.2e} train {result.train_s:.1f}s{flag}")


def seed_everything(seed: int) -> None:
    import random

    random.seed(seed)
    torch.manual_seed(seed)
