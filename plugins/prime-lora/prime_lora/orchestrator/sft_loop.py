"""The orchestrator of SFT on a data set ([[data.source]]): every source is read and tokenized once at start
(one line each: rows kept, rows skipped by reason), then each step's batch is drawn from them (sft_batches.py)
and handed to the trainer as the RL loop hands its batches (rollouts/step_N/, written by loop.write_batch).

No vLLM is needed to pace: batch N waits, as in RL, for weights of step N-1-max_async_level. With
[orchestrator.eval] the run's vLLM serves the policy and the online evals run as in the RL loop.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from prime_cli.train.plugin_api import (
    RLConfig,
    TrainingRunLayout,
    describe_bad,
    read_source,
    training_weights,
)

from .loop import StepFault, checkpoint_path, write_batch
from .online_eval import OnlineEval
from .servers import InferencePool, InferenceServerHandle
from .sft_batches import SftBatches, SourceSamples
from .sft_tokens import BadRow, conversation_sample
from .wandb_extras import due, sft_extras, write_extras
from .weights import PolicyWeights


def load_tokenizer(config: RLConfig) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(training_weights(config.model.name).path))


def tokenize_sources(config: RLConfig, tokenizer: Any, base: Path) -> tuple[list[SourceSamples], dict[str, int]]:
    """Every source's samples (one line printed per source) and the bad rows of all, by reason."""
    sources, bad_total = [], {}
    for source in config.orchestrator.algo.dataset.source:
        rows = read_source(source, base)
        bad = dict(rows.bad)
        samples, longest = [], 0
        for conversation in rows.conversations:
            try:
                samples.append(conversation_sample(tokenizer, conversation, config.seq_len, env=f"sft:{source.dataset}"))
            except BadRow as problem:
                # rows longer than seq_len are counted together; the longest says how far seq_len would have to go
                reason = problem.reason if problem.tokens is None else "too long"
                bad[reason] = bad.get(reason, 0) + 1
                longest = max(longest, problem.tokens or 0)
        if "too long" in bad:
            bad[f"longer than seq_len {config.seq_len} (up to {longest} tokens)"] = bad.pop("too long")
        skipped = describe_bad(bad)
        print(f"data: {len(samples)} rows from {rows.description}" + (f" ({skipped})" if skipped else ""), flush=True)
        for reason, count in bad.items():
            bad_total[reason] = bad_total.get(reason, 0) + count
        sources.append(SourceSamples(source.dataset, samples, source.ratio))
    empty = [s.name for s in sources if not s.samples]
    if empty:
        raise StepFault(f"no usable SFT rows in {', '.join(empty)}"
                        + (f" ({describe_bad(bad_total)})" if bad_total else "")
                        + "; fix the data or the config")
    return sources, bad_total


async def wait_for_weights(output_dir: Path, min_step: int, poll_s: float = 0.2) -> tuple[float, int]:
    """Until the trainer wrote weights of step >= min_step: (seconds waited, the newest step)."""
    started = time.perf_counter()
    layout = TrainingRunLayout(output_dir)
    while True:
        steps = layout.weight_steps()
        if steps and steps[-1] >= min_step:
            return time.perf_counter() - started, steps[-1]
        await asyncio.sleep(poll_s)


async def pace(output_dir: Path, oldest_allowed: int, weights: PolicyWeights | None,
               online: OnlineEval | None) -> tuple[float, int]:
    """An SFT step's wait for the trainer: (seconds waited, the policy step). Without online evals only the
    weights' files; with them, as the RL loop: the due eval's weights loaded, and the eval run beside the step."""
    if online is None:
        return await wait_for_weights(output_dir, oldest_allowed)
    waited = await weights.ensure(oldest_allowed, cap=online.next_step, before_load=online.wait)
    online.start_if_due(weights.loaded)
    return waited, weights.loaded


def eval_pool(config: RLConfig, base_urls: list[str]) -> InferencePool:
    from prime_cli.train.plugin_api import EndpointSpec, OpenAIChatClient

    servers = []
    for index, url in enumerate(base_urls):
        spec = EndpointSpec(f"policy-{index}", config.policy_name, url, None)
        client = OpenAIChatClient(spec, max_concurrent=config.orchestrator.max_concurrent)
        servers.append(InferenceServerHandle(url, None, client))  # nothing is sampled for training
    return InferencePool(servers)


async def run_sft(config: RLConfig, output_dir: Path, base_urls: list[str] | None, resume_step: int | None,
                  base: Path | None = None) -> int:
    """Write every step's batch; with [orchestrator.eval], evaluate the policy on the run's vLLM (base_urls)."""
    if config.orchestrator.eval is not None and not base_urls:
        raise StepFault("[orchestrator.eval] needs the run's inference server: start the orchestrator with --base-url")
    pool = eval_pool(config, base_urls) if config.orchestrator.eval is not None else None
    try:
        await sft_steps(config, output_dir, pool, resume_step or 0, base or Path.cwd())
    finally:
        if pool is not None:
            await pool.aclose()
    return 0


async def sft_steps(config: RLConfig, output_dir: Path, pool: InferencePool | None, start: int, base: Path) -> None:
    orch = config.orchestrator
    tokenizer = load_tokenizer(config)
    sources, bad = tokenize_sources(config, tokenizer, base)
    batches = SftBatches(sources, orch.batch_size, config.orchestrator_seed, orch.algo.dataset.shuffle)
    rows = sum(len(s.samples) for s in sources)
    print(f"data: {rows} rows in all; {orch.batch_size} samples a step, so an epoch of {sources[0].name} is "
          f"{batches.steps_per_epoch():.1f} steps", flush=True)
    if start:
        changed = batches.restore(json.loads(checkpoint_path(output_dir, start).read_text()).get("sft", {}))
        if changed:
            print(f"warning: the rows of {', '.join(changed)} changed since step {start} was saved: their order "
                  "starts over", file=sys.stderr, flush=True)
    weights = PolicyWeights(output_dir, pool, config.policy_name) if pool is not None else None
    online = OnlineEval(config, output_dir, pool.primary.url, pool.primary.eval_client, start) if pool else None
    for step in range(start + 1, config.max_steps + 1):
        step_started = time.perf_counter()
        oldest_allowed = max(0, step - 1 - orch.max_async_level)
        waited, policy_step = await pace(output_dir, oldest_allowed, weights, online)
        samples = batches.next_batch()
        loss_tokens = sum(sum(s["loss_mask"]) for s in samples)
        stats = {"step": step, "policy_step": policy_step, "samples": len(samples), "effective_batch_size": len(samples),
                 "loss_tokens": loss_tokens, "tokens": sum(len(s["input_ids"]) for s in samples),
                 "epoch": round(batches.epoch, 4), "sft_rows": rows, "bad_rows": sum(bad.values()),
                 "wait_weights_s": waited}
        if due(config, step):
            write_extras(output_dir, step, sft_extras(step, samples, tokenizer, config))
        write_batch(TrainingRunLayout(output_dir).rollouts_dir(step), samples, stats,
                    {"step": step, "sft": batches.state()})
        print(f"step {step}: {len(samples)} samples, {loss_tokens} loss tokens, epoch {batches.epoch:.2f}, "
              f"waited {waited:.1f}s for weights (policy step {policy_step}), "
              f"total {time.perf_counter() - step_started:.1f}s", flush=True)
    if online is not None:
        await online.finish(weights)
