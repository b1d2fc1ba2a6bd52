"""python -m prime_lora.trainer --config OUT/config.json [--resume-step K]"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from prime_cli.train.plugin_api import JsonLinesError, RLConfig, training_weights

from ..devices import apply_trainer_cpus
from .distributed import init_distributed
from .loop import seed_everything, train


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m prime_lora.trainer")
    parser.add_argument("--config", required=True, type=Path)
    parser.add_argument("--resume-step", type=int, default=None)
    parser.add_argument("--model-path", default=None, help="weights folder (default: resolved from model.name)")
    args = parser.parse_args(argv)
    config = RLConfig.model_validate_json(args.config.read_text())
    apply_trainer_cpus()
    seed_everything(config.seed)
    model_path = args.model_path or training_weights(config.model.name).path
    dist = init_distributed(fsdp=config.trainer.model.fsdp)
    try:
        return train(config, args.config.parent, model_path, args.resume_step, dist)
    except JsonLinesError as exc:  # a damaged evals.jsonl line: its file and line, the launcher shows it
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        if dist.world > 1:
            import torch.distributed

            torch.distributed.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
