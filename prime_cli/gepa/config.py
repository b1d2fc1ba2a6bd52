"""GEPA configuration: one validated model for flags and `configs/gepa/*.toml` files."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, PrivateAttr

from prime_cli.clients.command_flags import is_local_model
from prime_cli.clients.run_target import RunTarget
from prime_cli.envs.errors import EnvConfigError
from prime_cli.runs.config_fields import Count, Dollars, Seconds, ZeroOrMore
from prime_cli.runs.config_loading import build_model, read_toml_config

# Seconds per model request: the embedded model on CPU answers within this once max_tokens is bounded,
# and a stuck request is noticed sooner than with the default for remote servers.
DEFAULT_TIMEOUT = 600.0
LOCAL_TIMEOUT = 300.0
# A child that won its minibatch late in the budget is validated on as many validation rows as the budget
# left pays for, never fewer than this (all of them when -N is smaller): validation.py says why.
MIN_VALIDATION_ROWS = 10
# Reflection replies hold a whole rewritten system prompt (plus a short analysis before it).
REFLECTION_MAX_TOKENS = 1024


class GepaConfig(RunTarget):
    """Everything one GEPA run needs. Field names are the TOML keys; the environment, the student and where
    it is served (env_id, env_args, model, base_url, api_key_var, endpoints_path: the last two serve the
    reflection model too) are the shared RunTarget block. A resumed run keeps every saved value but those
    resume_rules.CHANGEABLE_ON_RESUME names (and a larger max_calls)."""

    model_config = ConfigDict(extra="forbid")

    reflection_model: str | None = None
    reflection_base_url: str | None = None
    max_calls: Count = 500
    max_cost: Dollars | None = None  # dollars: stop before the spend would pass it (gepa/cost.py)
    num_train: Count = 100
    num_val: Count = 50
    num_test: ZeroOrMore = 0
    minibatch_size: Count = 3
    rollouts_per_example: Count = 1
    perfect_score: float | None = None
    state_columns: list[str] = Field(default_factory=list)
    max_concurrent: Count = 32
    parallel_proposals: Count = 1
    speculative_proposals: ZeroOrMore = 0
    max_reflection_failures: Count = 3
    sampling_args: dict[str, Any] = Field(default_factory=dict)
    reflection_sampling_args: dict[str, Any] = Field(default_factory=dict)
    seed: int = 0
    run_dir: str | None = None
    max_retries: ZeroOrMore = 3
    timeout: Seconds | None = None
    display: Literal["auto", "rich", "plain", "json"] = "auto"
    # the built-in name (`local`, `local-moe`) of the reflection model where a local server of this session
    # serves it (the student's is RunTarget's)
    _reflection_builtin: str | None = PrivateAttr(default=None)

    @property
    def reflection_served_local(self) -> bool:
        return self._reflection_builtin is not None

    def local_models(self) -> list[str]:
        """The built-in models without a URL among the student and the reflection model, in that order."""
        names = [self.model if self.wants_builtin() else None,
                 self.reflector if is_local_model(self.reflector) and not self.reflection_base_url else None]
        return list(dict.fromkeys(name for name in names if name))

    def on_local_servers(self, servers: Mapping[str, tuple[str, str]]) -> GepaConfig:
        """The student and/or reflection model that are built-in without a URL, pointed at their servers
        (`servers`: built-in name -> (served model id, URL))."""
        student = self.model if self.wants_builtin() else None
        reflection = self.reflector if is_local_model(self.reflector) and not self.reflection_base_url else None
        update: dict[str, Any] = {}
        if student:
            update.update(model=servers[student][0], base_url=servers[student][1])
        if reflection:
            update.update(reflection_model=servers[reflection][0], reflection_base_url=servers[reflection][1])
        config = self.model_copy(update=update)
        config.serve_locally(student)
        config._reflection_builtin = reflection
        return config

    def timeout_for(self, served_local: bool) -> float:
        """--timeout, or the default for the server: shorter for the embedded model."""
        if self.timeout is not None:
            return self.timeout
        return LOCAL_TIMEOUT if served_local else DEFAULT_TIMEOUT

    def student_sampling_args(self) -> dict[str, Any]:
        """-S/-t/-T, over the environment's own defaults (`[tool.prime.eval]`), as `prime eval run` samples."""
        from prime_cli.envs.eval_defaults import env_sampling_defaults  # lazy: start-up

        return {**env_sampling_defaults(self.env_id, self.sampling_args), **self.sampling_args}

    def reflection_request_args(self) -> dict[str, Any]:
        return {"max_tokens": REFLECTION_MAX_TOKENS, **self.reflection_sampling_args}

    def reflection_max_tokens(self) -> int:
        """The most tokens a reflection reply may take: the context room the reflection prompt must leave free."""
        args = self.reflection_request_args()
        value = args.get("max_completion_tokens") or args.get("max_tokens")
        return value if isinstance(value, int) and value > 0 else REFLECTION_MAX_TOKENS

    def as_given(self) -> dict[str, Any]:
        """The config as the user gave it (saved in metadata.json): `local` where the embedded model serves."""
        data = self.model_dump(exclude={"display"})
        if self.builtin_name:
            data.update(model=self.builtin_name, base_url=None)
        if self._reflection_builtin:
            data.update(reflection_model=self._reflection_builtin, reflection_base_url=None)
        return data

    @property
    def reflector(self) -> str:
        return self.reflection_model or self.model

    @property
    def validation_pass_cost(self) -> int:
        return self.num_val * self.rollouts_per_example

    @property
    def min_validation_rows(self) -> int:
        """The fewest validation rows a child that won its minibatch is validated on (validation.py)."""
        return min(self.num_val, MIN_VALIDATION_ROWS)

    @property
    def min_validation_cost(self) -> int:
        return self.min_validation_rows * self.rollouts_per_example

    @property
    def shown_rows(self) -> int:
        """Most of its other already-scored train rows, its lowest, that a parent's reflection is shown (planner.py)."""
        return 2 * self.minibatch_size

    @property
    def minibatch_cost(self) -> int:
        """Parent and child on a fresh minibatch: the least a proposal pays for."""
        return 2 * self.minibatch_size * self.rollouts_per_example

    @property
    def proposal_cost(self) -> int:
        """Most rollouts one proposal pays for: parent and child on the minibatch."""
        return self.minibatch_cost

    def minimum_budget(self) -> int:
        """The seed's validation pass plus one parent/child comparison and the validation of a winner."""
        return self.validation_pass_cost + self.minibatch_cost + self.min_validation_cost

    def check_budget(self) -> None:
        if self.max_calls < self.minimum_budget():
            raise EnvConfigError(
                f"--max-calls {self.max_calls} is below the minimum of {self.minimum_budget()} rollouts for "
                f"this run (one validation pass of {self.num_val} rows x {self.rollouts_per_example} rollout(s), "
                f"plus {self.minibatch_cost} for one proposal and {self.min_validation_cost} to validate its child on "
                f"{self.min_validation_rows} rows); raise -B to at least {self.minimum_budget()} "
                f"or lower -N/--num-val")


def build_config(where: str, **values: Any) -> GepaConfig:
    return build_model(GepaConfig, where, values)


def load_toml(path: Path) -> dict[str, Any]:
    data = read_toml_config(path, "configs/gepa/*.toml")
    if isinstance(data.get("gepa"), dict):  # a [gepa] table is accepted as well as top-level keys
        data = {**{k: v for k, v in data.items() if k != "gepa"}, **data["gepa"]}
    return data


def config_for(target: str, values: dict[str, Any]) -> GepaConfig:
    """An environment id, or a TOML file (flags given on the command line override its keys)."""
    if target.endswith(".toml") or Path(target).is_file():
        return build_config(str(target), **{**load_toml(Path(target)), **values})
    return build_config("command line", env_id=target, **values)
