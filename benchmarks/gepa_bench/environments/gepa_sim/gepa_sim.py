"""gepa-sim: the simulated task of benchmarks/gepa_vs_gepa.py as a prime environment."""

import sys
from pathlib import Path

import prime_cli.envs as vf

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import sim  # noqa: E402


def load_environment(system_prompt: str = sim.SEED_PROMPT) -> vf.Environment:
    def exact(completion, answer) -> float:
        return 1.0 if completion and (completion[-1].get("content") or "").strip() == answer else 0.0

    return vf.SingleTurnEnv(dataset=sim.make_rows(400, 1), eval_dataset=sim.make_rows(400, 2),
                            system_prompt=system_prompt, rubric=vf.Rubric(funcs=[exact]))
