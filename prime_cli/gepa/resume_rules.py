"""The settings a resumed GEPA run may change: where and how requests are sent, never what the search
decides (a larger -B too: api.resume_conflict). Kept light (no pydantic): `prime gepa run --help` says it."""

from __future__ import annotations

# config key -> the flag(s) that set it, in the order --help and docs/gepa.md list them
RESUME_FLAGS = {
    "base_url": "-b", "reflection_base_url": "--reflection-base-url", "api_key_var": "-k", "endpoints_path": "-e",
    "max_concurrent": "-c", "timeout": "--timeout", "max_retries": "--max-retries", "max_cost": "--max-cost",
    "speculative_proposals": "--speculate", "max_reflection_failures": "--max-reflection-failures",
    "num_test": "--num-test", "display": "--plain/--json",
}
CHANGEABLE_ON_RESUME = frozenset(RESUME_FLAGS) | {"run_dir"}  # -o names the run being resumed

RESUME_HELP = ("Resume the GEPA run in this directory. Its saved settings are the defaults; a flag that differs from "
               "them is refused, except a larger -B and the flags of where and how requests are sent ("
               + ", ".join(RESUME_FLAGS.values()) + ").")
