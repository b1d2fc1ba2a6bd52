"""The judge model of `prime env check -m`: resolved as `prime eval run` resolves -m (registry id, model id
with -b, LiteLLM name), through the client layer (its retries, concurrency limit and secret handling),
and given to every JudgeRubric of the environment. The policy model is never called."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prime_cli.clients.command_flags import is_local_model
from prime_cli.clients.errors import ClientConfigError

from .rollouts import judge_rubrics

JUDGE_CONCURRENCY = 16  # judge requests in flight at once (per endpoint)
JUDGE_TIMEOUT = 120.0  # seconds per judge call
DEFAULT_RETRIES = 3


@dataclass(frozen=True)
class JudgeFlags:
    """-m, -b, -k, -e and --max-retries as given."""

    model: str
    base_url: str | None = None
    api_key_var: str | None = None
    endpoints_path: str | None = None
    max_retries: int | None = None


def judge_specs(flags: JudgeFlags) -> list[Any]:
    """The judge's endpoints; ClientConfigError (one line, exit 2) on a bad name, URL, registry or unset key
    variable. Sends no request."""
    from prime_cli.clients.endpoints import check_endpoints, endpoint_specs  # lazy: already loaded

    if is_local_model(flags.model) and not flags.base_url:
        raise ClientConfigError(f"-m {flags.model}: prime env check does not start the embedded model; give the URL of "
                                "a running server with -b (e.g. one `prime serve` started), or another judge model")
    check_endpoints(flags.model, flags.base_url, flags.api_key_var, flags.endpoints_path)
    return endpoint_specs(flags.model, flags.base_url, flags.api_key_var, flags.endpoints_path)


def open_judges(rubric: Any, specs: list[Any], max_retries: int | None) -> Any:
    """A client pool for the judge, and every JudgeRubric of `rubric` (RubricGroup and EnvGroup children
    included) pointed at it, with the resolved model id. Returns the pool (close it in the loop that used it)."""
    from prime_cli.clients.endpoints import open_pool  # lazy: already loaded

    retries = DEFAULT_RETRIES if max_retries is None else max_retries
    pool = open_pool(specs, max_concurrent=JUDGE_CONCURRENCY, max_retries=retries, timeout=JUDGE_TIMEOUT)
    for index, judge in enumerate(judge_rubrics(rubric)):
        client, model = pool.for_group(index)
        judge.judge_client = client
        judge.judge_model = model
        judge.class_objects["judge_client"] = client
        judge.class_objects["judge_model"] = model
    return pool
