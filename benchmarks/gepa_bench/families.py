"""The task families of benchmarks/gepa_vs_gepa.py: for each, the prime environment, its seed prompt and the
scripted server's reply function, made from the run's draws (draws.py: fresh or frozen noise).
sim.py: family "sim"; sim_edit.py: family "edit"; sim_format.py: family "format"."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import sim
import sim_edit
import sim_format
from draws import Draws


@dataclass(frozen=True)
class Family:
    name: str
    env_id: str  # ./environments/<env_id with underscores>/ under benchmarks/gepa_bench
    seed_prompt: str
    make_reply: Callable[[Draws], Callable[[dict], str]]
    harmful: tuple[str, ...] = ()  # instructions that hurt (reported: which best prompts still carry them)
    planted: str | None = None  # the harmful instruction of the seed prompt

    def server_reply(self, noise: str, seed: int) -> Callable[[dict], str]:
        """The reply function of one run's scripted server (prime and gepa at one seed: the same start)."""
        return self.make_reply(Draws(noise, f"{self.name}:{seed}"))


FAMILIES = {
    "sim": Family("sim", "gepa-sim", sim.SEED_PROMPT, sim.make_reply),
    "edit": Family("edit", "gepa-sim-edit", sim_edit.SEED_PROMPT, sim_edit.make_reply,
                   tuple(sim_edit.HARMFUL), sim_edit.PLANTED),
    "format": Family("format", "gepa-sim-format", sim_format.SEED_PROMPT, sim_format.make_reply,
                     tuple(sim_format.WRONG_FORMATS)),
}
