"""The `--dry-run` plan's lines for what a run learns from beyond RL: SFT data, a teacher's rollouts,
on-policy distillation, and a warm start from an adapter (config_sft.py)."""

from __future__ import annotations

from typing import Any


def _teacher(teacher: Any, config: Any) -> str:
    if teacher.adapter is not None:
        return f"adapter {teacher.adapter} on {config.model.name}, served by this run's vLLM as {teacher.served_name!r}"
    url = (teacher.client.base_url or [None])[0]
    return f"{teacher.model.name} at {url}" if url else f"{teacher.model.name} on this run's vLLM"


def _filter(teacher_or_source: Any) -> str:
    rules = []
    if teacher_or_source.min_reward is not None:
        rules.append(f"reward >= {teacher_or_source.min_reward:g}")
    if teacher_or_source.best_per_example:
        rules.append("the best per example")
    return f" (kept: {', '.join(rules)})" if rules else ""


def sft_data_lines(config: Any) -> list[str]:
    """The orchestrator's lines for an SFT run on a data set."""
    dataset = config.orchestrator.algo.dataset
    total = sum(s.ratio for s in dataset.source)
    lines = [f"SFT data: {s.dataset}" + (f" [{s.split}]" if s.split != "train" else "")
             + (f", {s.ratio / total:.0%} of each batch" if len(dataset.source) > 1 else "") + _filter(s)
             + (f", first {s.max_rows} rows" if s.max_rows else "") for s in dataset.source]
    lines.append(f"batch_size {config.orchestrator.batch_size} samples per step, "
                 f"{'shuffled each epoch (seed ' + str(config.seed) + ')' if dataset.shuffle else 'in file order'}; "
                 "each row tokenised with the model's chat template, the loss on assistant turns only")
    return lines


def teacher_rollout_lines(config: Any) -> list[str]:
    teacher = config.orchestrator.teacher_rollout_model
    return [f"teacher rollouts: {_teacher(teacher, config)} plays the environments{_filter(teacher)}; "
            "the student is fine-tuned (SFT) on what it wrote"]


def distillation_lines(config: Any) -> list[str]:
    loss = config.trainer.loss
    alone = " (alone: adv_tau = 0)" if loss.adv_tau == 0 else f" + {loss.adv_tau:g} x the environment's advantage"
    return [f"distillation: teacher {_teacher(config.orchestrator.teacher_model, config)} scores every sampled token; "
            f"per-token advantage = {loss.teacher_tau:g} x (teacher log-prob - student log-prob){alone}"]


def loss_line(config: Any) -> str:
    loss = config.trainer.loss
    if loss.type == "sft":
        return "loss: cross-entropy on the assistant tokens (SFT), packed rows, no old log-probs or ratio"
    line = (f"loss: importance-ratio policy loss, tokens with ratio outside [{loss.ratio_low:g}, {loss.ratio_high:g}] "
            "masked")
    return line + (f", + teacher KL (teacher_tau {loss.teacher_tau:g})" if loss.teacher_tau > 0 else "")


def warm_start_line(config: Any) -> list[str]:
    adapter = config.model.adapter
    return [f"starts from the adapter {adapter} (weights/step_0 is a copy; vLLM serves it from step 0)"] \
        if adapter else []
