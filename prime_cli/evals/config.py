"""Eval configuration: one validated model for flags, TOML `[[eval]]` entries and env defaults."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, PrivateAttr, field_validator

from prime_cli.clients.command_flags import LOCAL_MODEL, is_local_model
from prime_cli.clients.run_target import RunTarget
from prime_cli.envs.errors import EnvConfigError
from prime_cli.envs.eval_defaults import ENV_DEFAULT_KEYS, env_eval_defaults  # noqa: F401 - re-exported
from prime_cli.records.eval_run import ROW_KEYS
from prime_cli.runs.config_fields import Count, Dollars, NonNegative, Seconds, ZeroOrMore
from prime_cli.runs.config_loading import build_model, read_toml_config

DEFAULT_NUM_EXAMPLES = 5
DEFAULT_ROLLOUTS_PER_EXAMPLE = 3
DEFAULT_MAX_CONCURRENT = 32
DEFAULT_MAX_ERROR_RATE = 0.1
DEFAULT_TIMEOUT = 600.0
# The embedded model (`-m local`) on a CPU: SmolLM2 at temperature 1 sometimes rambles toward its 4096-token
# context (minutes per reply). Where neither the user nor the environment caps a reply, it is capped here,
# and a stuck call is retried sooner than a remote server's (GEPA uses the same timeout).
LOCAL_MAX_TOKENS = 512
LOCAL_TIMEOUT = 300.0


class EvalConfig(RunTarget):
    """Everything one eval run needs. Field names are the TOML keys of an `[[eval]]` entry; the environment,
    the model and where it is served (env_id, env_args, model, base_url, api_key_var, endpoints_path) are
    the shared RunTarget block."""

    model_config = ConfigDict(extra="forbid")

    extra_env_kwargs: dict[str, Any] = Field(default_factory=dict)
    headers: dict[str, str] = Field(default_factory=dict)
    num_examples: int | None = None
    rollouts_per_example: Count | None = None
    max_concurrent: Count = DEFAULT_MAX_CONCURRENT
    max_tokens: Count | None = None
    temperature: NonNegative | None = None
    sampling_args: dict[str, Any] = Field(default_factory=dict)
    save_results: bool = False
    resume: str | None = None
    retry_errors: str | None = None
    independent_scoring: bool = False
    output_dir: str | None = None
    state_columns: list[str] = Field(default_factory=list)
    max_retries: ZeroOrMore = 3
    timeout: Seconds = DEFAULT_TIMEOUT
    pass_threshold: float = 1.0
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE
    max_cost: Dollars | None = None  # dollars: stop launching rollouts before the spend would pass it
    power_delta: float | None = None  # the summary also says how many examples would detect this difference
    seed: int | None = None
    verbose: bool = False
    display: Literal["auto", "rich", "plain", "json"] = "auto"
    sandbox: str | None = None  # the sandbox provider for environments that run model-written code (bwrap, podman, docker, none)
    # set by the checkpoint sweep: which weights this run evaluates, saved in metadata.json as `sweep`
    _sweep: dict[str, Any] | None = PrivateAttr(default=None)
    # set by `served_locally`: the embedded model's defaults this run took (max_tokens, timeout), for the header
    _local_defaults: dict[str, Any] = PrivateAttr(default_factory=dict)

    @property
    def local_defaults(self) -> dict[str, Any]:
        """The embedded model's defaults this run took because neither the user nor the environment set them."""
        return self._local_defaults

    @property
    def sweep(self) -> dict[str, Any] | None:
        return self._sweep

    @field_validator("num_examples")
    @classmethod
    def _check_n(cls, value: int | None) -> int | None:
        if value is not None and (value == 0 or value < -1):
            raise ValueError("must be a positive number, or -1 for all")
        return value

    @field_validator("state_columns")
    @classmethod
    def _extra_columns(cls, value: list[str]) -> list[str]:
        taken = [name for name in value if name in ROW_KEYS]
        if taken:
            raise ValueError(f"must not name a column that results.jsonl already has: {', '.join(taken)}")
        return value

    @field_validator("power_delta")
    @classmethod
    def _delta(cls, value: float | None) -> float | None:
        if value is not None and (value == 0 or not math.isfinite(value)):
            raise ValueError("must be a non-zero reward difference to detect, e.g. 0.05")
        return value

    @field_validator("sandbox")
    @classmethod
    def _sandbox(cls, value: str | None) -> str | None:
        names = ("bwrap", "podman", "docker", "none")  # prime_cli.sandbox.NAMES, not imported here (kept light)
        if value is not None and value not in names:
            raise ValueError(f"must be one of {', '.join(names)}")
        return value

    @field_validator("max_error_rate")
    @classmethod
    def _fraction(cls, value: float) -> float:
        if not 0.0 <= value <= 1.0:
            raise ValueError("must be a fraction between 0 and 1 (e.g. 0.1 for 10%)")
        return value

    def merged_sampling_args(self) -> dict[str, Any]:
        args = dict(self.sampling_args)
        if self.max_tokens is not None:
            args["max_tokens"] = self.max_tokens
        if self.temperature is not None:
            args["temperature"] = self.temperature
        return args


def served_locally(config: EvalConfig, model: str, url: str) -> EvalConfig:
    """`config` on its built-in model (`-m local`, `-m local-moe`), served at `url` for this session, with the
    embedded model's reply cap and timeout where nothing else sets them (`local_defaults`)."""
    defaults = local_defaults(config)
    local = config.model_copy(update={"model": model, "base_url": url, **defaults})
    local.serve_locally(config.model if is_local_model(config.model) else LOCAL_MODEL)
    local._local_defaults = defaults
    return local


def local_defaults(config: EvalConfig) -> dict[str, Any]:
    """`timeout` unless --timeout (or the TOML key) gave one; `max_tokens` for a new run whose reply length
    nothing caps: not -t, -S, the TOML entry, nor the environment's [tool.prime.eval] (a resumed run keeps
    the sampling arguments it was started with)."""
    defaults: dict[str, Any] = {}
    if "timeout" not in config.model_fields_set:
        defaults["timeout"] = LOCAL_TIMEOUT
    given = config.merged_sampling_args()
    capped = any(key in given for key in ("max_tokens", "max_completion_tokens")) or \
        "max_tokens" in env_eval_defaults(config.env_id)
    if not capped and not (config.resume or config.retry_errors):
        defaults["max_tokens"] = LOCAL_MAX_TOKENS
    return defaults


def build_config(where: str, **values: Any) -> EvalConfig:
    return build_model(EvalConfig, where, values)


def load_toml_configs(path: Path, overrides: dict[str, Any] | None = None) -> list[EvalConfig]:
    """`[[eval]]` entries of a TOML file; top-level keys are defaults shared by every entry."""
    data = read_toml_config(path, "configs/eval/*.toml")
    entries = data.pop("eval", None)
    if not isinstance(entries, list) or not entries:
        raise EnvConfigError(f"{path} has no [[eval]] entries; add one with at least `env_id = \"...\"`")
    configs = []
    for i, entry in enumerate(entries, start=1):
        values = {**data, **entry, **(overrides or {})}
        configs.append(build_config(f"{path} [[eval]] #{i}", **values))
    return configs


