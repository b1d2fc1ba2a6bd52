"""`prime eval run`: flags in, one engine call, an exit code out."""

from __future__ import annotations

import json
from typing import Any

import typer

from . import options
from .errors import fail, fail_config, json_object_arg

NEWEST_RUN = "latest"  # the eval engine's -R value for the newest unfinished run

eval_app = typer.Typer(
    help="Evaluate models on environments (`prime eval run`), export saved runs, and browse them "
    "(`prime eval view`, also named `prime eval tui`). `prime eval ENV` is short for `prime eval run ENV`.",
    no_args_is_help=True,
)


def _headers(values: list[str] | None) -> dict[str, str] | None:
    if not values:
        return None
    headers = {}
    for item in values:
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            fail(f"--header must look like 'Name: value', got {item!r}")
        headers[name.strip()] = value.strip()
    return headers


@eval_app.command("run", cls=options.BareResumeCommand)
def run(
    ctx: typer.Context,
    target: str = typer.Argument(..., help="Environment id (e.g. reverse-text) or a TOML file with [[eval]] entries."),
    model: options.ModelOpt = None,
    base_url: options.BaseUrlOpt = None,
    api_key_var: options.ApiKeyVarOpt = None,
    endpoints_path: options.EndpointsPathOpt = None,
    num_examples: int | None = typer.Option(None, "-n", "--num-examples", help="Examples to evaluate (-1: all). Default 5, or the environment's [tool.prime.eval]."),
    rollouts_per_example: int | None = typer.Option(None, "-r", "--rollouts-per-example", help="Rollouts per example, run and scored as a group. Default 3."),
    max_concurrent: int | None = typer.Option(None, "-c", "--max-concurrent", help="Most rollouts in flight at once. Default 32."),
    max_tokens: int | None = typer.Option(None, "-t", "--max-tokens", help="Max tokens per model reply. Default: the environment's [tool.prime.eval] max_tokens; with -m local (the embedded model), 512 where the environment sets none."),
    temperature: float | None = typer.Option(None, "-T", "--temperature", help="Sampling temperature."),
    sampling_args: str | None = typer.Option(None, "-S", "--sampling-args", help="JSON of extra sampling arguments, e.g. '{\"top_p\": 0.9}'."),
    env_args: options.EnvArgsOpt = None,
    sandbox: options.SandboxOpt = None,
    extra_env_kwargs: str | None = typer.Option(None, "-x", "--extra-env-kwargs", help="JSON of environment attributes to set after loading, e.g. '{\"max_turns\": 5}'."),
    state_columns: str | None = typer.Option(None, "-C", "--state-columns", help="Comma-separated extra state keys to save per rollout (e.g. trajectory,turn)."),
    save_results: bool | None = typer.Option(None, "-s", "--save-results", help="Save the run (metadata.json, results.jsonl, eval.log)."),
    resume: str | None = typer.Option(None, "-R", "--resume", help="Resume a run: its directory, or no value for the newest unfinished run. Model, -b, -k, -a and sampling args come from the run unless given."),
    retry_errors: str | None = typer.Option(None, "--retry-errors", help="Rerun the errored rollouts of this run directory, and any it never ran (with the run's own model, -b, -k, -a and sampling args unless given)."),
    independent_scoring: bool | None = typer.Option(None, "-i", "--independent-scoring", help="Score each rollout alone instead of per group."),
    verbose: bool | None = typer.Option(None, "-v", "--verbose", help="Print each rollout as it finishes (prompt tail, completion, reward, metrics, stop/error; a `rollout` event with --json) and log at debug level in eval.log."),
    output_dir: str | None = typer.Option(None, "-o", "--output-dir", help="Directory that run folders are created in, instead of <env>/outputs/evals (not a run folder itself)."),
    header: list[str] | None = typer.Option(None, "--header", help="Extra HTTP header 'Name: value' (repeatable)."),
    max_retries: options.MaxRetriesOpt = None,
    timeout: float | None = typer.Option(None, "--timeout", help="Seconds per model call before it is retried from scratch (said on stderr). Default 600, 300 for -m local (the embedded model)."),
    seed: int | None = typer.Option(None, "--seed", help="Shuffle the examples with this seed before taking -n."),
    pass_threshold: float | None = typer.Option(None, "--pass-threshold", help="Reward at or above which a rollout passes (pass@k: one of k passes; pass^k: all k pass). Default 1.0."),
    max_error_rate: float | None = typer.Option(None, "--max-error-rate", help="Error budget, a fraction (default 0.1). A run over it at the end ends 'completed with errors' (exit 1). A run clearly over it early stops (exit 1, status failed; finish it with --retry-errors DIR): once 20 rollouts have finished and the lower end of the error rate's 95% interval is above the budget, so a broken endpoint costs about 20 rollouts. 1 never stops."),
    max_cost: float | None = typer.Option(None, "--max-cost", metavar="USD", help="Stop launching rollouts before the run's dollar spend (student and judge tokens at the model's prices: the registry entry's input_price/output_price, else LiteLLM's table) would pass USD; the run is saved as cancelled (exit 1) with the command to resume it. A resumed run counts what it already spent."),
    power_delta: float | None = typer.Option(None, "--power", metavar="DELTA", help="The summary also says how many examples a run needs to detect a reward difference of DELTA against another run at 80% power (two-sided, 5%), from this run's spread across examples."),
    json_output: bool = typer.Option(False, "--json", help="Print NDJSON events (start, progress, rollout with -v, done; with --weights-dir a final `sweep` event) instead of the live panel."),
    weights_dir: str | None = typer.Option(None, "--weights-dir", help="Checkpoint sweep: evaluate every PEFT adapter in this training run's weights/ folder (weights/step_N), each loaded at run time into one vLLM as model step_N, plus the base model; one saved run each, then a table (mean reward, std, pass@k, pass^k, best step marked). The environment gets the env args of the run's config.json unless -a is given. Needs -m local or -b URL of a vLLM server with runtime LoRA loading."),
    steps: str | None = typer.Option(None, "--steps", help="With --weights-dir: only these steps, e.g. 10,50,100. Default: all in the folder."),
    no_eval_base: bool = typer.Option(False, "--no-eval-base", help="With --weights-dir: skip the base model."),
) -> None:
    """Evaluate a model on an environment and print a summary (pass@k, pass^k, metrics, errors).

    With --weights-dir OUT/weights, evaluate a training run's checkpoints instead (a sweep): the base
    model, then each adapter step_N, one saved run each, and print a table with the best step marked.
    """
    values: dict[str, Any] = {
        "model": model, "base_url": base_url, "api_key_var": api_key_var, "endpoints_path": endpoints_path,
        "num_examples": num_examples, "rollouts_per_example": rollouts_per_example, "max_concurrent": max_concurrent,
        "max_tokens": max_tokens, "temperature": temperature,
        "sampling_args": json_object_arg("-S/--sampling-args", sampling_args),
        "env_args": json_object_arg("-a/--env-args", env_args),
        "extra_env_kwargs": json_object_arg("-x/--extra-env-kwargs", extra_env_kwargs),
        "state_columns": [c.strip() for c in state_columns.split(",") if c.strip()] if state_columns else None,
        "save_results": save_results, "resume": NEWEST_RUN if resume == options.BARE else resume, "retry_errors": retry_errors,
        "independent_scoring": independent_scoring, "verbose": verbose, "output_dir": output_dir,
        "headers": _headers(header), "max_retries": max_retries, "timeout": timeout, "seed": seed,
        "pass_threshold": pass_threshold, "max_error_rate": max_error_rate, "power_delta": power_delta, "max_cost": max_cost, "display": "json" if json_output else None, "sandbox": sandbox,
    }
    values = {k: v for k, v in values.items() if v is not None}
    if values.get("resume") or values.get("retry_errors"):
        values["save_results"] = True
    if weights_dir is not None:
        _sweep(ctx, target, values, weights_dir, _steps(steps), not no_eval_base)
    if steps is not None or no_eval_base:
        fail(f"{'--steps' if steps is not None else '--no-eval-base'} only applies to a checkpoint sweep; "
             "add --weights-dir OUT/weights")
    from prime_cli.envs.errors import UserInputError  # lazy: start-up
    from prime_cli.evals.api import run_evals  # lazy: start-up
    from prime_cli.serve.errors import ServeError  # lazy: start-up

    try:
        code = run_evals(target, values)
    except (UserInputError, ServeError) as exc:
        fail_config(exc, ctx, values)
    raise typer.Exit(code)


def _steps(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        steps = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        fail(f"--steps must be step numbers separated by commas, like 10,50,100; got {text!r}")
    if not steps or any(step < 0 for step in steps):
        fail(f"--steps must be step numbers separated by commas, like 10,50,100; got {text!r}")
    return steps


def _sweep(ctx: typer.Context, target: str, values: dict[str, Any], weights_dir: str, steps: list[int] | None,
           eval_base: bool) -> None:
    from prime_cli.envs.errors import UserInputError  # lazy: start-up
    from prime_cli.evals.sweep import run_sweep  # lazy: start-up
    from prime_cli.serve.errors import ServeError  # lazy: start-up

    try:
        code = run_sweep(target, values, weights_dir, steps, eval_base)
    except (UserInputError, ServeError) as exc:
        fail_config(exc, ctx, values)
    raise typer.Exit(code)


@eval_app.command("export")
def export(
    run: str = typer.Argument(..., metavar="RUN", help="An eval run folder (outputs/evals/<env>--<model>/<run_id>) or its results.jsonl."),
    fmt: str = typer.Option("csv", "-f", "--format", help="csv, parquet (needs pyarrow) or jsonl."),
    output: str | None = typer.Option(None, "-o", "--output", help="File to write. Default: ./<env>--<model>--<run_id>.<format>."),
) -> None:
    """Write a saved run's rows as one csv, parquet or jsonl file (metrics also as metrics.<name> columns)."""
    from prime_cli.envs.errors import UserInputError  # lazy: start-up
    from prime_cli.evals.export import export_run  # lazy: start-up

    try:
        written, rows = export_run(run, fmt.lower(), output)
    except UserInputError as exc:
        fail(str(exc))
    typer.echo(f"exported {rows} rows to {written}")


@eval_app.command("compare")
def compare(
    run_a: str = typer.Argument(..., metavar="A", help="The baseline eval run folder (or its results.jsonl)."),
    run_b: str = typer.Argument(..., metavar="B", help="The eval run compared with it, of the same environment."),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as one JSON object."),
    power: float | None = typer.Option(None, "--power", metavar="DELTA", help="Also say how many paired examples would detect a reward difference of DELTA at 80% power, from the spread observed here."),
) -> None:
    """Is B better than A? Pairs the runs on example id and prints B - A with its 95% interval, a p-value
    (paired t-test on per-example mean rewards, two-sided), how many examples got better, worse or stayed
    the same, and the same for each metric both runs have and for pass@k and pass^k (every k both have).
    Errored rollouts are left out and counted."""
    import math  # lazy: already loaded

    from prime_cli.envs.errors import UserInputError  # lazy: start-up
    from prime_cli.results.compare import (  # lazy: start-up
        compare_runs,
        comparison_json,
        comparison_lines,
    )

    if power is not None and (power == 0 or not math.isfinite(power)):
        fail(f"--power must be a non-zero reward difference to detect, e.g. 0.05 (got {power:g})")
    try:
        result = compare_runs(run_a, run_b, power)
    except UserInputError as exc:
        fail(str(exc))
    if as_json:
        typer.echo(json.dumps(comparison_json(result)))
        return
    for line in comparison_lines(result):
        typer.echo(line, err=line.startswith("warning: "))


@eval_app.command("rescore", cls=options.BareResumeCommand)
def rescore(
    run_dir: str = typer.Argument(..., metavar="RUN", help="A saved eval run folder (or its results.jsonl)."),
    env_args: str | None = typer.Option(None, "-a", "--env-args", help="JSON of arguments for load_environment(). Default: the run's own."),
    output_dir: str | None = typer.Option(None, "-o", "--output-dir", help="Directory that the new run folder is created in (under <env>--<model>/). Default: beside RUN."),
    resume: str | None = typer.Option(None, "-R", "--resume", metavar="NEW_RUN", help="Finish an interrupted rescore of RUN in the folder it printed."),
    max_concurrent: int = typer.Option(32, "-c", "--max-concurrent", min=1, help="Examples scored at once (matters for judge rubrics)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON `done` event instead of the summary."),
) -> None:
    """Re-run the environment's rubric, as it is now, on a saved run's completions (no policy model calls).

    Writes a new run folder whose metadata names its source (`rescored_from`) and prints its summary and
    the paired difference to the saved rewards, overall and per reward function. A rubric that reads a
    state key the run did not save is refused: save it next time with `prime eval run -C KEY`.
    Ctrl-C keeps the rows scored so far; the printed --resume command finishes the rest."""
    from prime_cli.envs.errors import UserInputError  # lazy: start-up
    from prime_cli.evals.rescore_report import run_rescore  # lazy: start-up

    if resume == options.BARE:
        fail("-R/--resume needs the folder of the rescore to finish: the one an interrupted "
             "`prime eval rescore` printed after 'Resume with:'")
    args = json_object_arg("-a/--env-args", env_args)
    try:
        code = run_rescore(run_dir, args, output_dir, resume, max_concurrent, as_json)
    except UserInputError as exc:
        fail(str(exc))
    raise typer.Exit(code)
