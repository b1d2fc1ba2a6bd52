"""gepa-sim-format: task family "format" of benchmarks/gepa_vs_gepa.py (sim_format.py) as a prime environment."""

import sys
from pathlib import Path

import prime_cli.envs as vf

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import sim_format  # noqa: E402


def load_environment(system_prompt: str = sim_format.SEED_PROMPT) -> vf.Environment:
    def exact(completion, answer) -> float:
        return 1.0 if completion and (completion[-1].get("content") or "").strip() == answer else 0.0

    train_salt, eval_salt = sim_format.ROW_SALTS
    return vf.SingleTurnEnv(dataset=sim_format.make_rows(400, train_salt),
                            eval_dataset=sim_format.make_rows(400, eval_salt),
                            system_prompt=system_prompt, rubric=vf.Rubric(funcs=[exact]))
