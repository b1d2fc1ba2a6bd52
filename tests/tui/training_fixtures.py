"""A small `prime train` output folder written by hand: config.json, metrics.jsonl, and per step
rollouts/step_N/{stats.json, batch.jsonl}; optionally a word-level tokenizer so samples decode."""

from __future__ import annotations

import json
from pathlib import Path

from prime_cli.runs.layouts import TrainingRunLayout

WORDS = ["<pad>", "Reverse:", "▁abc", "▁cba", "▁bca", "▁[tool]", "▁ok", "▁."]


def write_tokenizer(folder: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<pad>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.decoder = decoders.Metaspace(prepend_scheme="never")  # "▁" decodes to a space
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))


def sample(reward: float, advantage: float, policy_step: int) -> dict:
    # prompt "Reverse: abc", trained "cba", masked tool output "[tool] ok", trained "."
    ids = [1, 2, 3, 5, 6, 7]
    mask = [0, 0, 1, 0, 0, 1]
    return {"input_ids": ids, "loss_mask": mask, "inference_logprobs": [-0.5 * m for m in mask],
            "advantage": advantage, "reward": reward, "env": "reverse-text", "example_id": 7,
            "policy_step": policy_step, "truncated": False}


def write_training_run(out: Path, steps: int = 4, max_steps: int = 6, tokenizer: bool = False,
                       trained: int | None = None, step_stats: dict[int, dict] | None = None) -> Path:
    """A run of `steps` sampled steps, the first `trained` (default all) of them trained; `step_stats`
    adds keys to a step's stats.json (and so to its metrics row), e.g. its error rates."""
    layout = TrainingRunLayout(out)
    out.mkdir(parents=True, exist_ok=True)
    if tokenizer:  # as for model "local": the saved adapter names the base model's folder
        write_tokenizer(out.parent / "tiny-model")
        layout.weights_dir(0).mkdir(parents=True)
        (layout.weights_dir(0) / "adapter_config.json").write_text(
            json.dumps({"base_model_name_or_path": str(out.parent / "tiny-model")}))
    layout.config_path.write_text(json.dumps({"max_steps": max_steps, "model": {"name": "local"},
                                              "orchestrator": {"env": [{"id": "reverse-text"}]}}))
    trained = steps if trained is None else trained
    with layout.metrics_path.open("w") as metrics:
        for step in range(1, steps + 1):
            reward = 0.1 + 0.2 * step
            stats = {"step": step, "policy_step": step - 1, "reward_mean": reward, "reward_std": 0.05 * step,
                     "completion_len_mean": 10.0 + step, "generation_s": 2.5, "wait_weights_s": 0.0,
                     **(step_stats or {}).get(step, {})}
            layout.rollouts_dir(step).mkdir(parents=True)
            layout.batch_stats_path(step).write_text(json.dumps(stats))
            rows = [sample(reward + 0.1, 0.1, step - 1), sample(reward - 0.1, -0.1, step - 1)]
            layout.batch_path(step).write_text("".join(json.dumps(r) + "\n" for r in rows))
            if step <= trained:
                metrics.write(json.dumps({**stats, "loss": 0.01, "mismatch_kl": 0.001 * step,
                                          "masked_fraction": 0.02, "entropy": 1.2 - 0.1 * step, "train_s": 3.5,
                                          "wait_batch_s": 0.25, "reward/mean": reward}) + "\n")
    return out
