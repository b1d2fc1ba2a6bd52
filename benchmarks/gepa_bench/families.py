"""The task families of benchmarks/gepa_vs_gepa.py: for each, the prime environment, its seed prompt and the
scripted server's reply function (sim.py: family "sim"; sim_edit.py: family "edit")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import sim
import sim_edit


@dataclass(frozen=True)
class Family:
    name: str
    env_id: str  # ./environments/<env_id with underscores>/ under benchmarks/gepa_bench
    seed_prompt: str
    server_reply: Callable[[dict], str]
    harmful: tuple[str, ...] = ()  # instructions that hurt (reported: which best prompts still carry them)
    planted: str | None = None  # the harmful instruction of the seed prompt


FAMILIES = {
    "sim": Family("sim", "gepa-sim", sim.SEED_PROMPT, sim.server_reply),
    "edit": Family("edit", "gepa-sim-edit", sim_edit.SEED_PROMPT, sim_edit.server_reply,
                   tuple(sim_edit.HARMFUL), sim_edit.PLANTED),
}
