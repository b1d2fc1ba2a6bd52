"""`prime eval compare A B`: two saved eval runs of one environment, paired on example id.

Each side's score of an example is the mean over its rollouts that did not error (an errored rollout is
left out and counted, never scored as 0); the comparison is a paired t-test on the per-example
differences B - A (prime_cli.results.intervals), for the reward, every metric both runs have, and pass@k and
pass^k for every k both runs have (compare_pass.py).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from prime_cli.envs.errors import UserInputError
from prime_cli.results.intervals import (
    NO_SPREAD,
    PairedComparison,
    examples_needed,
    format_p,
    paired_comparison,
    signed,
)

from .compare_pass import compare_pass, pass_json, pass_lines
from .cost import total_of, usd
from .eval_run import EvalRun, load_run
from .row_values import example_key


class CompareError(UserInputError):
    """The two runs cannot be compared (one line for the user)."""


@dataclass
class RunComparison:
    a: EvalRun
    b: EvalRun
    reward: PairedComparison
    metrics: dict[str, PairedComparison]
    only_a: int  # examples only A has
    only_b: int
    errored_a: int  # rollouts left out
    errored_b: int
    warnings: list[str] = field(default_factory=list)
    power_delta: float | None = None
    pass_k: dict[str, dict[str, PairedComparison]] = field(default_factory=dict)  # pass_at_k / pass_hat_k -> k -> B - A

    @property
    def no_spread(self) -> bool:
        """The paired differences are all the same (float noise aside): nothing to size a power estimate from."""
        return math.isfinite(self.reward.se) and self.reward.se * math.sqrt(self.reward.examples) <= NO_SPREAD

    @property
    def needed(self) -> int | None:
        """Paired examples needed to detect power_delta at 80% power, from the observed spread. None when it
        cannot be estimated: fewer than 2 paired examples, or differences with no spread (the count grows with
        the spread, so a spread of zero would claim 2 examples detect any difference)."""
        if self.power_delta is None or not math.isfinite(self.reward.se) or self.no_spread:
            return None
        return examples_needed(self.reward.se * math.sqrt(self.reward.examples), self.power_delta)

    def power_note(self) -> str | None:
        """Why `needed` is None (for the line and the JSON); None when it is not."""
        if self.power_delta is None or self.needed is not None:
            return None
        if self.no_spread:
            return (f"all {self.reward.examples} paired examples differ by the same {signed(self.reward.difference)}, "
                    "so these runs show no spread to size it from (the examples needed grow with the spread of "
                    "the per-example differences; more examples or rollouts per example may show one)")
        return "fewer than 2 paired examples"


def _scores(run: EvalRun, metric: str | None) -> tuple[dict[Any, list[float]], int]:
    by_example: dict[Any, list[float]] = defaultdict(list)
    errored = 0
    for row in run.rows:
        if row.get("error"):
            errored += 1
            continue
        value = row.get("reward") if metric is None else (row.get("metrics") or {}).get(metric)
        if isinstance(value, (int, float)) and math.isfinite(value):
            by_example[example_key(row.get("example_id"))].append(float(value))
    return dict(by_example), errored


def setting_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """One warning per setting the two runs' metadata differ in (sampling, environment arguments)."""
    notes = []
    for name, key in (("sampling", "sampling_args"), ("environment arguments", "env_args")):
        left, right = a.get(key) or {}, b.get(key) or {}
        if not isinstance(left, Mapping) or not isinstance(right, Mapping):
            continue
        if left != right:
            keys = sorted(k for k in set(left) | set(right) if left.get(k) != right.get(k))
            notes.append(f"the runs differ in {name} ({', '.join(f'{k}: {left.get(k)!r} vs {right.get(k)!r}' for k in keys)})")
    return notes


def _settings(run: EvalRun) -> dict[str, Any]:
    return {"sampling_args": run.metadata.sampling_args, "env_args": run.metadata.env_args}


def compare_runs(path_a: str, path_b: str, power_delta: float | None = None) -> RunComparison:
    a, b = load_run(path_a), load_run(path_b)
    if a.metadata.env_id != b.metadata.env_id:
        raise CompareError(f"A is a run of {a.metadata.env_id!r} and B of {b.metadata.env_id!r}: compare two runs "
                           "of the same environment")
    scores_a, errored_a = _scores(a, None)
    scores_b, errored_b = _scores(b, None)
    reward = paired_comparison(scores_a, scores_b)
    if reward is None:
        raise CompareError(f"the runs have no example in common ({len(scores_a)} examples in A, {len(scores_b)} "
                           "in B, none with the same example_id): run both on the same examples (-n, --seed)")
    metrics = {}
    for name in [n for n in a.metric_names() if n in b.metric_names()]:
        result = paired_comparison(_scores(a, name)[0], _scores(b, name)[0])
        if result is not None:
            metrics[name] = result
    pass_k, pass_warnings = compare_pass(a, b)
    return RunComparison(a, b, reward, metrics, only_a=sum(k not in scores_b for k in scores_a),
                         only_b=sum(k not in scores_a for k in scores_b), errored_a=errored_a, errored_b=errored_b,
                         warnings=setting_differences(_settings(a), _settings(b)) + pass_warnings,
                         power_delta=power_delta, pass_k=pass_k)


def _paired_json(result: PairedComparison) -> dict[str, Any]:
    def finite(x: float) -> float | None:
        return x if math.isfinite(x) else None

    return {"difference": result.difference, "ci95": [finite(result.low), finite(result.high)],
            "se": finite(result.se), "p_value": result.p_value, "examples": result.examples,
            "better": result.better, "worse": result.worse, "unchanged": result.unchanged,
            "verdict": result.verdict()}


def comparison_json(c: RunComparison) -> dict[str, Any]:
    return {"a": str(c.a.source_path), "b": str(c.b.source_path), "env_id": c.a.metadata.env_id,
            "models": [c.a.metadata.model, c.b.metadata.model], "reward": _paired_json(c.reward),
            "metrics": {name: _paired_json(m) for name, m in c.metrics.items()},
            **pass_json(c.pass_k, _paired_json),  # pass_at_k, pass_hat_k: {k: paired difference}
            "only_in_a": c.only_a, "only_in_b": c.only_b, "errored_rollouts_left_out": [c.errored_a, c.errored_b],
            "cost_usd": [total_of(c.a.metadata.cost), total_of(c.b.metadata.cost)],
            "warnings": c.warnings, "power": None if c.power_delta is None else
            {"delta": c.power_delta, "examples_needed": c.needed, "at_power": 0.8,
             **({"reason": "no_spread" if c.no_spread else "too_few_examples", "note": note}
                if (note := c.power_note()) else {})}}


def _cost(run: EvalRun) -> str:
    if not run.metadata.cost:
        return "not recorded"
    total = total_of(run.metadata.cost)
    return usd(total) if total is not None else "unknown (a model's prices are unknown)"


def comparison_lines(c: RunComparison) -> list[str]:
    reward = c.reward
    lines = [f"A: {c.a.source_path}  ({c.a.metadata.model})", f"B: {c.b.source_path}  ({c.b.metadata.model})",
             f"reward: {reward.verdict()}",
             f"  per example: {reward.better} better, {reward.worse} worse, {reward.unchanged} unchanged"]
    if c.only_a or c.only_b:
        lines.append(f"  not paired: {c.only_a} examples only in A, {c.only_b} only in B")
    if c.errored_a or c.errored_b:
        lines.append(f"  errored rollouts left out: {c.errored_a} in A, {c.errored_b} in B")
    if c.a.metadata.cost or c.b.metadata.cost:
        lines.append(f"cost: A {_cost(c.a)}; B {_cost(c.b)}")
    for name, result in c.metrics.items():
        lines.append(f"{name}: {signed(result.difference)} [{signed(result.low)}, {signed(result.high)}], "
                     f"{format_p(result.p_value)}")
    lines += pass_lines(c.pass_k)
    if c.power_delta is not None:
        needed = c.needed
        lines.append(f"to detect a difference of {c.power_delta:g} at 80% power: "
                     + (f"about {needed} paired examples (this comparison has {reward.examples})" if needed
                        else f"cannot be estimated: {c.power_note()}" if c.no_spread
                        else f"not computable ({c.power_note()})"))
    lines += [f"warning: {w}" for w in c.warnings]
    lines.append("(95% intervals; a paired t-test on per-example mean differences, two-sided)")
    return lines
