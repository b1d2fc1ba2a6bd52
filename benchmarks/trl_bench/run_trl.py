"""The TRL side of benchmarks/trainer_vs_trl.py: GRPOTrainer on reverse-text, one JSON spec in.

    benchmarks/.venv-trl/bin/python benchmarks/trl_bench/run_trl.py SPEC.json OUT_DIR

Runs in benchmarks/.venv-trl (trl, datasets, accelerate installed there; torch, transformers, peft and
prime itself come from the repository's .venv through a .pth file). Everything loads from local
folders (HF_HUB_OFFLINE=1). SPEC.json (written by trainer_vs_trl.py) holds the model folder, the
prompts in the order prime's orchestrator draws them, and the settings. Writes OUT_DIR/metrics.jsonl
(one line per step: reward_mean, reward_std, step_s, ... and TRL's own logged values under "trl")
and OUT_DIR/summary.json.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any


def reward_function(spec: dict[str, Any]):
    """The environment's own rubric (the config's env args; reversal_reward with plain_text), as a TRL reward function."""
    from prime_cli.envs import load_environment

    env = load_environment(spec["env_id"], **spec["env_args"])
    rubric = env.rubric

    def reverse_text_reward(prompts, completions, answer, **kwargs) -> list[float]:
        states = [{"prompt": p, "completion": c, "answer": a, "task": spec["env_id"], "info": {}}
                  for p, c, a in zip(prompts, completions, answer, strict=True)]
        scores = asyncio.run(rubric.compute_scores(states))
        return [s.reward for s in scores]

    return reverse_text_reward


def build_policy(spec: dict[str, Any]):
    """Base model in fp32 plus a fresh LoRA adapter, built in the same order and seed as prime's trainer
    (so both runs start from the same A matrices; B = 0 makes the start identical to the base model)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(spec["seed"])
    base = AutoModelForCausalLM.from_pretrained(spec["model_path"], dtype=torch.float32)
    lora = spec["lora"]
    config = LoraConfig(r=lora["rank"], lora_alpha=lora["alpha"], lora_dropout=lora["dropout"],
                        target_modules=lora["target_modules"], bias="none", task_type="CAUSAL_LM")
    return get_peft_model(base, config)


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    out = Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    wall_start = time.perf_counter()

    import torch
    import trl
    from datasets import Dataset
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    if spec.get("threads"):
        torch.set_num_threads(spec["threads"])

    class StepClock(TrainerCallback):
        """Wall time between consecutive optimizer steps (like prime's step_s) and TRL's logged values."""

        def __init__(self) -> None:
            self.last = 0.0
            self.step_s: dict[int, float] = {}
            self.logs: dict[int, dict[str, Any]] = {}

        def on_train_begin(self, args, state, control, **kwargs):
            self.last = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            now = time.perf_counter()
            self.step_s[state.global_step] = now - self.last
            self.last = now

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "reward" in logs:
                self.logs[state.global_step] = dict(logs)

    s = spec["settings"]
    rows = spec["rows"]  # one per prompt, in prime's draw order: step 1's prompts, then step 2's, ...
    dataset = Dataset.from_list([{"prompt": r["prompt"], "answer": r["answer"], "example_id": r["example_id"]}
                                 for r in rows])
    config = GRPOConfig(
        output_dir=str(out / "trl-output"),
        max_steps=s["steps"],
        per_device_train_batch_size=s["prompts_per_step"] * s["generations"],  # 16 completions per step
        gradient_accumulation_steps=1,
        num_generations=s["generations"],
        num_iterations=1,
        beta=0.0,
        loss_type=s["loss_type"],
        scale_rewards="none",
        epsilon=0.2,  # PPO clip; inert here: one iteration on fresh samples makes every ratio exactly 1
        max_completion_length=s["max_tokens"],
        temperature=s["temperature"],
        top_p=1.0,
        top_k=0,
        learning_rate=s["lr"],
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=s["weight_decay"],
        adam_beta1=0.9,
        adam_beta2=0.999,
        max_grad_norm=s["max_grad_norm"],
        optim="adamw_torch",
        bf16=False,
        fp16=False,
        use_cpu=True,
        gradient_checkpointing=False,  # prime: trainer.model.ac unset (no activation checkpointing)
        shuffle_dataset=False,  # keep prime's prompt order
        seed=spec["seed"],
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    tokenizer = AutoTokenizer.from_pretrained(spec["model_path"])
    model = build_policy(spec)
    clock = StepClock()

    class TimedGRPOTrainer(GRPOTrainer):
        """Records the wall time of each generation call (one per step here)."""

        generation_s: list[float] = []

        def _generate(self, *args, **kwargs):
            start = time.perf_counter()
            result = super()._generate(*args, **kwargs)
            self.generation_s.append(time.perf_counter() - start)
            return result

    trainer = TimedGRPOTrainer(model=model, reward_funcs=reward_function(spec), args=config, train_dataset=dataset,
                          processing_class=tokenizer, callbacks=[clock])
    train_start = time.perf_counter()
    trainer.train()
    train_s = time.perf_counter() - train_start
    trainer.save_model(str(out / "adapter"))  # the final adapter (prime writes one every step)

    with (out / "metrics.jsonl").open("w") as handle:
        for step in sorted(clock.step_s):
            logs = clock.logs.get(step, {})
            generation_s = TimedGRPOTrainer.generation_s[step - 1] if step <= len(TimedGRPOTrainer.generation_s) else None
            handle.write(json.dumps({
                "step": step, "step_s": clock.step_s[step], "reward_mean": logs.get("reward"),
                "reward_std": logs.get("reward_std"), "completion_len_mean": logs.get("completions/mean_length"),
                "generation_s": generation_s,
                "trl": logs}) + "\n")
    summary = {"trl_version": trl.__version__, "torch_threads": torch.get_num_threads(), "train_s": train_s,
               "in_process_wall_s": time.perf_counter() - wall_start}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
