"""python -m prime_lora.orchestrator --config OUT/config.json --base-url URL [--base-url URL2 ...] [--resume-step K]

SFT on a data set (orchestrator.algo.type = "dataset_sft", sft_loop.py) needs --base-url only with
[orchestrator.eval] (the run's vLLM serves the policy for the evals); SFT on a teacher's rollouts
(teacher_rollout_model, teacher_rollouts.py) also when the run's vLLM serves the teacher.

Exit codes: 0 every batch written; 1 the inference server failed; 3 a step failed past
orchestrator.max_error_rate or left no trainable sample (the last stderr line: `fatal: <cause>`)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from prime_cli.train.plugin_api import RLConfig, TrainConfigError

from .loop import EndpointDown, StepFault, run
from .rollout_errors import FATAL_PREFIX, FAULT_EXIT_CODE
from .servers import NoServerLeft
from .sft_loop import run_sft
from .teacher_rollouts import run_teacher_sft
from .weights import AdapterLoadError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m prime_lora.orchestrator")
    parser.add_argument("--config", required=True, type=Path)
    parser.add_argument("--base-url", action="append", help="an inference server (repeatable)")
    parser.add_argument("--resume-step", type=int, default=None)
    args = parser.parse_args(argv)
    config = RLConfig.model_validate_json(args.config.read_text())
    if config.needs_inference and not args.base_url:
        parser.error("--base-url is required (the inference server the run samples from)")
    try:
        if config.orchestrator.from_data:
            return asyncio.run(run_sft(config, args.config.parent, args.base_url, args.resume_step))
        if config.orchestrator.teacher_rollout_model is not None:
            return asyncio.run(run_teacher_sft(config, args.config.parent, args.base_url, args.resume_step))
        return asyncio.run(run(config, args.config.parent, args.base_url, args.resume_step))
    except (EndpointDown, NoServerLeft, AdapterLoadError) as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 1
    except (StepFault, TrainConfigError) as exc:  # the last line written (TrainConfigError: SFT data unreadable): the launcher shows its cause
        sys.stdout.flush()
        print(FATAL_PREFIX + " ".join(str(exc).split()), file=sys.stderr, flush=True)
        return FAULT_EXIT_CODE


if __name__ == "__main__":
    sys.exit(main())
