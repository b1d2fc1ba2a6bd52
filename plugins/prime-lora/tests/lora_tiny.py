"""A tiny Llama built from a config (random weights) and hand-written batches for trainer tests."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from prime_cli.train.config import RLConfig

VOCAB = 96


def tiny_model(folder: Path) -> str:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         tie_word_embeddings=True, pad_token_id=0)
    LlamaForCausalLM(config).save_pretrained(folder)
    return str(folder)


def tiny_moe_model(folder: Path, kind: str = "mixtral", experts: int = 4, layers: int = 2) -> str:
    """A tiny Mixture-of-Experts model (transformers 5's fused 3D experts): Mixtral (Llama attention) or
    Qwen3-MoE, 2 of `experts` active per token."""
    import torch
    from transformers import MixtralConfig, MixtralForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM

    torch.manual_seed(0)
    common = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=layers, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=256, tie_word_embeddings=True, pad_token_id=0,
                  num_experts_per_tok=2)
    if kind == "mixtral":
        model = MixtralForCausalLM(MixtralConfig(intermediate_size=64, num_local_experts=experts, **common))
    else:
        model = Qwen3MoeForCausalLM(Qwen3MoeConfig(intermediate_size=64, moe_intermediate_size=16, head_dim=8,
                                                   num_experts=experts, norm_topk_prob=True, **common))
    model.save_pretrained(folder)
    return str(folder)


def tiny_config(output_dir: Path, **overrides: Any) -> RLConfig:
    data = {"max_steps": 2, "seq_len": 256, "output_dir": str(output_dir),
            "inference": {"model": {"max_model_len": 256}},
            "trainer": {"micro_batch_size": 3, "optim": {"lr": 1e-2}, "ckpt": {"interval": 1},
                        "model": {"lora": {"rank": 4, "alpha": 8, "dropout": 0.1}}},
            "orchestrator": {"batch_size": 4, "rollouts_per_example": 2, "env": [{"id": "reverse-text"}]}}
    return config_with(data, overrides)


def config_with(data: dict[str, Any], overrides: dict[str, Any]) -> RLConfig:
    """`data` with each dotted key of `overrides` set (tables made as needed), validated as an RLConfig."""
    for key, value in overrides.items():
        node = data
        *path, last = key.split(".")
        for part in path:
            node = node.setdefault(part, {})
        node[last] = value
    return RLConfig.model_validate(data)


def make_samples(seed: int, count: int = 4) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    samples = []
    for _ in range(count):
        prompt = [rng.randrange(1, VOCAB) for _ in range(rng.randint(3, 9))]
        completion = [rng.randrange(1, VOCAB) for _ in range(rng.randint(2, 7))]
        samples.append({"input_ids": prompt + completion, "loss_mask": [0] * len(prompt) + [1] * len(completion),
                        "inference_logprobs": [0.0] * len(prompt) + [-4.6 + rng.uniform(-0.3, 0.3) for _ in completion],
                        "advantage": rng.uniform(-1, 1), "reward": 0.5, "env": "tiny", "example_id": 0,
                        "policy_step": 0, "truncated": False})
    return samples


def write_batch(output_dir: Path, step: int, samples: list[dict[str, Any]]) -> None:
    folder = output_dir / "rollouts" / f"step_{step}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "stats.json").write_text(json.dumps({"step": step, "reward_mean": 0.5}))
    (folder / "batch.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))


def make_group_samples(seed: int, groups: int = 2, per_group: int = 4) -> list[dict[str, Any]]:
    """Rollout groups as the orchestrator writes them: one prompt each, completions of different lengths."""
    rng = random.Random(seed)
    samples = []
    for group in range(groups):
        prompt = [rng.randrange(1, VOCAB) for _ in range(rng.randint(6, 12))]
        for _ in range(per_group):
            completion = [rng.randrange(1, VOCAB) for _ in range(rng.randint(1, 7))]
            samples.append({"input_ids": prompt + completion, "loss_mask": [0] * len(prompt) + [1] * len(completion),
                            "inference_logprobs": [0.0] * len(prompt) + [-4.6 + rng.uniform(-0.3, 0.3) for _ in completion],
                            "advantage": rng.uniform(-1, 1), "reward": 0.5, "env": "tiny", "example_id": group,
                            "policy_step": 0, "truncated": False})
    return samples


def multi_turn_samples(seed: int, count: int) -> list[dict]:
    """prompt, reply, environment tokens, reply (and sometimes a third turn): loss tokens in several runs."""
    rng = random.Random(seed)
    samples = []
    for _ in range(count):
        ids, mask = [], []
        for turn in range(rng.randint(2, 3)):
            context = [rng.randrange(1, VOCAB) for _ in range(rng.randint(2, 6) if turn else rng.randint(4, 9))]
            reply = [rng.randrange(1, VOCAB) for _ in range(rng.randint(1, 6))]
            ids += context + reply
            mask += [0] * len(context) + [1] * len(reply)
        samples.append({"input_ids": ids, "loss_mask": mask,
                        "inference_logprobs": [0.0 if not m else -4.6 + rng.uniform(-0.3, 0.3) for m in mask],
                        "advantage": rng.uniform(-1, 1)})
    return samples
