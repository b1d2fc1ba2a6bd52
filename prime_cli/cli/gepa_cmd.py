"""`prime gepa run`: optimise an environment's system prompt with GEPA."""

from __future__ import annotations

from typing import Any

import typer

from prime_cli.gepa.resume_rules import RESUME_HELP

from . import options
from .errors import fail, fail_config, json_object_arg

gepa_app = typer.Typer(help="Optimise an environment's system prompt with GEPA.", no_args_is_help=True)


def student_sampling(args: dict[str, Any] | None, max_tokens: int | None, temperature: float | None) -> dict[str, Any] | None:
    """-S with -t and -T folded in (they win), as `prime eval run` merges them."""
    flags = {k: v for k, v in (("max_tokens", max_tokens), ("temperature", temperature)) if v is not None}
    return {**(args or {}), **flags} if args is not None or flags else None


@gepa_app.command("run", cls=options.BareResumeCommand)
def run(
    ctx: typer.Context,
    target: str | None = typer.Argument(None, help="Environment id (e.g. reverse-text) or a TOML config (configs/gepa/*.toml). May be left out with -R."),
    model: options.ModelOpt = None,
    reflection_model: str | None = typer.Option(None, "-M", "--reflection-model", help="Model that rewrites the prompt from feedback (endpoint id or model id). Default: the student model. Its prompt is shortened to fit its context (registry context_length, the server's max_model_len, or LiteLLM's table); a run that cannot fit is refused up front."),
    base_url: options.BaseUrlOpt = None,
    reflection_base_url: str | None = typer.Option(None, "--reflection-base-url", help="Base URL for -M when it is served elsewhere. Default: -b."),
    api_key_var: options.ApiKeyVarOpt = None,
    endpoints_path: options.EndpointsPathOpt = None,
    max_calls: int | None = typer.Option(None, "-B", "--max-calls", help="Budget in student rollouts (validation, minibatches and the final pick's re-rolls; the test set is extra), never exceeded: a late winner is validated on the rows it leaves. Default 500."),
    max_cost: float | None = typer.Option(None, "--max-cost", metavar="USD", help="Stop before the run's dollar spend (student rollouts, judge calls and reflection calls at the models' prices: a registry entry's input_price/output_price, else LiteLLM's table) would pass USD; the run is saved as cancelled (exit 1) with the command to resume it, which counts what was already spent."),
    num_train: int | None = typer.Option(None, "-n", "--num-train", help="Training rows (from the dataset) that minibatches are drawn from. Default 100."),
    num_val: int | None = typer.Option(None, "-N", "--num-val", help="Validation rows (from the eval dataset) that accepted prompts are scored on. Default 50."),
    num_test: int | None = typer.Option(None, "--num-test", help="Held-out rows (eval dataset, after the validation rows) to score the seed and the best prompt on at the end. Default 0 (off)."),
    minibatch_size: int | None = typer.Option(None, "--minibatch-size", help="Train rows per reflection; a child must beat its parent on them. Default 3."),
    rollouts_per_example: int | None = typer.Option(None, "-r", "--rollouts-per-example", help="Rollouts per row; a row's score is their mean (less noisy acceptance). Default 1."),
    perfect_score: float | None = typer.Option(None, "--perfect-score", help="Skip minibatches where the parent already scores at least this on every row (e.g. 1.0). Default: never skip."),
    state_columns: str | None = typer.Option(None, "--state-columns", help="Comma-separated extra rollout-state keys shown to the reflection model."),
    max_concurrent: int | None = typer.Option(None, "-c", "--max-concurrent", help="Most student rollouts in flight at once. Default 32."),
    parallel_proposals: int | None = typer.Option(None, "-P", "--parallel-proposals", help="Proposals in flight at once, committed in order (faster; each sees the front up to P-1 proposals late). Default 1: GEPA's serial loop."),
    speculative_proposals: int | None = typer.Option(None, "--speculate", help="Prefetch the next N proposals the serial loop would make if those in flight were rejected (their minibatches and reflection calls): same choices and budget, faster, at the price of model calls that go unused after an acceptance. Default 0 (off)."),
    seed: int | None = typer.Option(None, "--seed", help="Seed for row selection, minibatches and parent choice. Default 0."),
    run_dir: str | None = typer.Option(None, "-o", "--run-dir", help="Run directory: new or empty, or an existing GEPA run (with state.json), which is resumed as with -R; any other folder is refused. Default: outputs/gepa/<env>--<model>/<run_id>."),
    resume: str | None = typer.Option(None, "-R", "--resume", help=RESUME_HELP),
    env_args: options.EnvArgsOpt = None,
    max_tokens: int | None = typer.Option(None, "-t", "--max-tokens", min=1, help="Max tokens per student reply. Default: the environment's (as `prime eval run`)."),
    temperature: float | None = typer.Option(None, "-T", "--temperature", min=0.0, help="Student sampling temperature. Default: the environment's, else the server's."),
    sampling_args: str | None = typer.Option(None, "-S", "--sampling-args", help="JSON of sampling arguments for the student, e.g. '{\"top_p\": 0.9}'; the environment's max_tokens/temperature apply where not given, as in `prime eval run`."),
    reflection_sampling_args: str | None = typer.Option(None, "--reflection-sampling-args", help="JSON of sampling arguments for the reflection model. Default max_tokens 1024, e.g. '{\"max_tokens\": 2048}'."),
    max_reflection_failures: int | None = typer.Option(None, "--max-reflection-failures", help="Stop after this many reflections in a row that fail (errors, each already retried: the run fails) or, while no new rollout is paid for, give no new prompt to try (cut at max_tokens, no ``` block, a known prompt: the run ends early). Default 3."),
    max_retries: options.MaxRetriesOpt = None,
    timeout: float | None = typer.Option(None, "--timeout", help="Seconds per model call before it is retried from scratch (said on stderr). Default 600, 300 for the local model."),
    plain: bool = typer.Option(False, "--plain", help="Plain progress lines instead of the live panel."),
    json_output: bool = typer.Option(False, "--json", help="Print NDJSON events (start, progress, iteration, message, done) instead of the live panel."),
    verbose: bool = typer.Option(False, "-v", "--verbose", help="After the result, print where the wall time went: startup, loading, setup, search (seed validation within it), test, finish (also in metadata.json's `stages`)."),
) -> None:
    """Optimise the environment's system prompt with GEPA (reflective Pareto search) and print the best one.

    The student model (-m) answers the environment's prompts; the reflection model (-M) reads its scored
    replies and rewrites the prompt.
    """
    values: dict[str, Any] = {
        "model": model, "reflection_model": reflection_model, "base_url": base_url,
        "reflection_base_url": reflection_base_url, "api_key_var": api_key_var, "endpoints_path": endpoints_path,
        "max_calls": max_calls, "max_cost": max_cost, "num_train": num_train, "num_val": num_val, "num_test": num_test,
        "minibatch_size": minibatch_size, "rollouts_per_example": rollouts_per_example,
        "perfect_score": perfect_score,
        "state_columns": [c.strip() for c in state_columns.split(",") if c.strip()] if state_columns else None,
        "max_concurrent": max_concurrent, "parallel_proposals": parallel_proposals,
        "speculative_proposals": speculative_proposals, "seed": seed, "run_dir": run_dir,
        "env_args": json_object_arg("-a/--env-args", env_args),
        "sampling_args": student_sampling(json_object_arg("-S/--sampling-args", sampling_args), max_tokens, temperature),
        "reflection_sampling_args": json_object_arg("--reflection-sampling-args", reflection_sampling_args),
        "max_reflection_failures": max_reflection_failures, "max_retries": max_retries, "timeout": timeout,
        "display": "json" if json_output else "plain" if plain else None,
    }
    values = {k: v for k, v in values.items() if v is not None}
    if resume == options.BARE:
        fail("-R/--resume needs the folder of the GEPA run to resume (printed after 'Run directory:'), "
             "e.g. prime gepa run -R outputs/gepa/<env>--<model>/<run_id>")
    if resume is not None:
        if run_dir is not None and run_dir != resume:
            fail(f"-R {resume} and -o {run_dir} name different run folders; give one of them")
        values["run_dir"] = resume
    from prime_cli.envs.errors import UserInputError  # lazy: start-up
    from prime_cli.gepa.api import run_gepa  # lazy: start-up
    from prime_cli.serve.errors import ServeError  # lazy: start-up

    try:
        code = run_gepa(target, values, resume=resume is not None, verbose=verbose)
    except (UserInputError, ServeError) as exc:
        fail_config(exc, ctx, values)
    raise typer.Exit(code)
