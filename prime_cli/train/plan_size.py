"""The plan's warning for a GPU-sized config on a machine without CUDA: the tokens it may sample, scaled
from the CPU example's measured time (a rough bound, said as one)."""

from __future__ import annotations

from typing import Any

CPU_CONFIG = "configs/rl/reverse-text-cpu.toml"
CPU_STEPS, CPU_BATCH, CPU_MAX_TOKENS = 20, 16, 48  # its size, as the file sets it
CPU_MINUTES = 5.5  # its measured time on a CPU, with the embedded model (docs/training.md)
WARN_MINUTES = 30.0


def _duration(minutes: float) -> str:
    return f"{minutes:.0f} minutes" if minutes < 120 else f"{minutes / 60:.0f} hours"


def cpu_size_note(config: Any, cuda: bool) -> str | None:
    """A warning when the run would sample on this machine's CPU far more than the CPU example does."""
    from prime_cli.clients.command_flags import is_local_model  # lazy: start-up

    from .devices import is_multi_gpu  # lazy: start-up

    orch = config.orchestrator
    # a config for several GPUs is meant for another machine (the plan already says it would run on the CPU here)
    if cuda or is_multi_gpu(config) or orch.from_data or not config.needs_inference or orch.client.base_url:
        return None
    max_tokens = orch.sampling.max_tokens or config.inference.model.max_model_len
    tokens = config.max_steps * orch.batch_size * max_tokens
    ratio = tokens / (CPU_STEPS * CPU_BATCH * CPU_MAX_TOKENS)
    minutes = ratio * CPU_MINUTES
    if minutes <= WARN_MINUTES:
        return None
    model = "" if is_local_model(config.model.name) else f", longer still with {config.model.name} than with the embedded model"
    return (f"warning: this config is sized for a GPU and this machine has no CUDA: {config.max_steps} steps x "
            f"{orch.batch_size} rollouts x up to {max_tokens} tokens is {ratio:.0f}x {CPU_CONFIG} "
            f"({CPU_STEPS} x {CPU_BATCH} x {CPU_MAX_TOKENS}, about {CPU_MINUTES:g} minutes measured on a CPU), so up to "
            f"about {_duration(minutes)} here{model}; on a CPU run {CPU_CONFIG}, or lower max_steps, batch_size and "
            "max_tokens (--set KEY=VALUE)")
