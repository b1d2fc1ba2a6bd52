"""The Markdown tables of benchmarks/gepa_vs_gepa.py: means, paired differences, harmful instructions kept.

A run is one dict per (family, budget, optimiser, seed): seed, best_val, test, seed_test, metric_calls,
num_candidates, student_calls, reflection_calls, wall_s, best_prompt.

Paired differences are paired by seed (prime_cli.results.intervals.paired_comparison, a paired t-test on the
per-seed differences of test accuracy, df = seeds - 1). Not by (seed, test row): a seed's 100 test rows
are all scored with the one prompt that seed's search picked, so they are not independent draws, and
paired_comparison has no clustering; treating them as 1,000 independent pairs would shrink the interval
about tenfold for no reason. The seed is the unit the search varies.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from prime_cli.results.intervals import format_p, paired_comparison, signed

Runs = dict[tuple[str, int, str], list[dict]]  # (family, budget, optimiser) -> one run per seed


def means_table(runs: Runs, gepa: str) -> list[str]:
    """One row per (family, budget, optimiser): means over seeds; the gap is the best candidate's validation
    score minus its test score (how much the pick's score overstates it: the winner's curse); "wall / gepa"
    is "-" where gepa did not run (--no-gepa)."""
    lines = ["| family | budget | optimiser | best val | seed test | best test | gap (val - test) "
             "| rollouts used (mean / max) | over budget | candidates | student calls | reflection calls | wall s "
             "| wall / gepa |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (family, budget, name), results in runs.items():
        mean: Callable[[str], float] = lambda key: statistics.fmean(r[key] for r in results)  # noqa: E731,B023
        gepa_runs = runs.get((family, budget, gepa))
        ratio = f"{mean('wall_s') / statistics.fmean(r['wall_s'] for r in gepa_runs):.2f}" if gepa_runs else "-"
        over = sum(r["metric_calls"] > budget for r in results)
        lines.append(
            f"| {family} | {budget} | {name} | {mean('best_val'):.3f} | {mean('seed_test'):.3f} | {mean('test'):.3f} "
            f"| {signed(mean('best_val') - mean('test'))} "
            f"| {mean('metric_calls'):.0f} / {max(r['metric_calls'] for r in results)} | {over}/{len(results)} "
            f"| {mean('num_candidates'):.1f} | {mean('student_calls'):.0f} | {mean('reflection_calls'):.1f} "
            f"| {mean('wall_s'):.1f} | {ratio} |")
    return lines


def paired_table(runs: Runs, pairs: list[tuple[str, str]]) -> list[str]:
    """For each (b, a) in pairs: b minus a in test accuracy, paired by seed, per family and budget."""
    lines = ["| family | budget | difference | mean over seeds | 95% interval | p | won / tied / lost |",
             "|---|---|---|---|---|---|---|"]
    for family, budget in dict.fromkeys((f, b) for f, b, _ in runs):
        for b, a in pairs:
            by_seed = {side: {r["seed"]: [r["test"]] for r in runs[(family, budget, side)]} for side in (a, b)}
            paired = paired_comparison(by_seed[a], by_seed[b])
            if paired is None:
                continue
            interval = (f"[{signed(paired.low)}, {signed(paired.high)}]" if paired.se == paired.se and paired.se > 0
                        else "(no spread)")
            lines.append(f"| {family} | {budget} | {b} minus {a} | {signed(paired.difference)} | {interval} "
                         f"| {format_p(paired.p_value)} | {paired.better} / {paired.unchanged} / {paired.worse} |")
    return lines


def harmful_table(runs: Runs, family: str, harmful: tuple[str, ...], planted: str) -> list[str]:
    lines = [f'| budget | optimiser | best prompt keeps "{planted}" | best prompt keeps any harmful instruction |',
             "|---|---|---|---|"]
    for (fam, budget, name), results in runs.items():
        if fam != family:
            continue
        keeps = sum(planted in (r.get("best_prompt") or "") for r in results)
        any_harmful = sum(any(m in (r.get("best_prompt") or "") for m in harmful) for r in results)
        lines.append(f"| {budget} | {name} | {keeps}/{len(results)} | {any_harmful}/{len(results)} |")
    return lines


def seed_line(family: str, budget: int, name: str, run: dict, harmful: tuple[str, ...]) -> str:
    kept = [m for m in harmful if m in (run.get("best_prompt") or "")]
    return (f"{family} B={budget} seed {run['seed']} {name}: test {run['test']:.3f} val {run['best_val']:.3f} "
            f"rollouts {run['metric_calls']} candidates {run['num_candidates']} wall {run['wall_s']:.2f}s"
            + (f" harmful kept: {kept}" if harmful else ""))
