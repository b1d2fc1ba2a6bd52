"""The GEPA engine's entry point for the CLI: a config in, a run executed, an exit code out."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import prime_cli.envs as vf
from prime_cli.envs.errors import EnvConfigError
from prime_cli.records.gepa_run import GepaMetadata
from prime_cli.results.cost import cost_text
from prime_cli.runs.interrupt import CtrlC
from prime_cli.runs.status import RunStatus
from prime_cli.runs.visible import json_visible, visible

from .config import GepaConfig, build_config, config_for, load_toml
from .context_window import ContextWindow, load_tokenizer, reflection_window
from .cost import estimating, open_meter, stop_line
from .display import make_display
from .engine import GepaEngine, Outcome
from .evaluator import Evaluator, RolloutCache
from .fitting import check_fits
from .pareto import validated_leader
from .preflight import (
    SearchInputs,
    load_inputs,
    model_specs,
    open_model_pool,
    preflight,
)
from .resume_rules import CHANGEABLE_ON_RESUME
from .run_dir import STATE_FILE, GepaRunDir, RunDirError, default_base
from .scored import format_score
from .stages import Stages, stages_line
from .state import SearchState
from .state_columns import StateColumnCheck
from .stopping import ReflectionsExhausted, SearchPoint
from .uncertainty import bounds, bracket, paired_record, test_difference, verdict

logger = logging.getLogger("prime_cli.gepa")


def resolve_config(target: str | None, values: dict[str, Any], *, resume: bool = False) -> tuple[GepaConfig, bool]:
    """The config, and whether it resumes the run in -o/--run-dir (or -R, `resume`). A resumed run's saved
    config is the default; a flag given that differs from it is refused (see `resume_conflict`). An -o
    holding anything but a GEPA run (an eval run, other files, a file) is refused."""
    from prime_cli.runs.folders import check_gepa_run_dir  # lazy: start-up

    given_dir = values.get("run_dir")
    if target is None and not (resume and given_dir):
        raise EnvConfigError("give an environment id (or a TOML config), or -R RUN_DIR to resume a run")
    config = config_for(target, values) if target is not None else None
    run_dir_text = given_dir or (config.run_dir if config is not None else None)
    run_dir = Path(run_dir_text) if run_dir_text else None
    if run_dir is not None:
        check_gepa_run_dir(run_dir)
    if run_dir is None or not (run_dir / STATE_FILE).is_file():
        if resume:
            raise RunDirError(f"-R {run_dir} is not a GEPA run that can be resumed (it has no {STATE_FILE}); "
                              "give the folder of a run started by `prime gepa run`")
        assert config is not None
        return config, False
    stored = stored_config(run_dir)
    if config is None:
        config = config_for(str(stored.get("env_id")), values)
    given = config.model_dump()
    explicit = set(values) | {"env_id"}
    if target is not None and (target.endswith(".toml") or Path(target).is_file()):
        explicit |= set(load_toml(Path(target)))
    for key in sorted(explicit & set(stored) & set(given)):
        problem = resume_conflict(key, stored[key], given[key], run_dir)
        if problem:
            raise RunDirError(problem)
    merged = {**stored, **{k: given[k] for k in explicit if k in given}, "run_dir": str(run_dir)}
    return build_config("resumed run", **merged), True


def stored_config(run_dir: Path) -> dict[str, Any]:
    try:
        stored = json.loads((run_dir / "metadata.json").read_text(encoding="utf-8"))["config"]
    except (OSError, ValueError, KeyError, TypeError):
        stored = None
    if not isinstance(stored, dict):
        raise RunDirError(f"{run_dir} has a state.json but no readable metadata.json config; "
                          "pass a new -o/--run-dir to start afresh")
    return {k: v for k, v in stored.items() if k in GepaConfig.model_fields}


FLAG_NAMES = {"env_id": "ENV", "env_args": "-a/--env-args", "model": "-m/--model",
              "reflection_model": "-M/--reflection-model", "max_calls": "-B/--max-calls", "num_train": "-n/--num-train",
              "num_val": "-N/--num-val", "max_cost": "--max-cost", "minibatch_size": "--minibatch-size",
              "rollouts_per_example": "-r/--rollouts-per-example", "perfect_score": "--perfect-score",
              "state_columns": "--state-columns", "parallel_proposals": "-P/--parallel-proposals",
              "sampling_args": "-S/-t/-T (sampling args)", "reflection_sampling_args": "--reflection-sampling-args",
              "seed": "--seed"}


def resume_conflict(key: str, stored: Any, given: Any, run_dir: Path) -> str | None:
    """Why `given` may not replace the saved `stored` on resume (None when it may): only a larger -B and
    the settings of CHANGEABLE_ON_RESUME may differ."""
    if key in CHANGEABLE_ON_RESUME or given == stored:
        return None
    flag = FLAG_NAMES.get(key, key)
    if key == "max_calls":
        if given >= stored:
            return None
        return (f"{flag} {given} is below the budget of {stored} that the run in {run_dir} was started with; "
                f"resume with a larger -B, or leave -B out")
    return (f"{flag} {json.dumps(given)} differs from the {json.dumps(stored)} that the run in {run_dir} was "
            f"started with; leave {flag} out to resume with the saved value, or pass a new -o/--run-dir for a new run")


def open_pools(config: GepaConfig) -> tuple[Any, Any, list[str]]:
    """Student and reflection clients, resolved exactly as `prime eval run` resolves -m."""
    from prime_cli.clients.endpoints import secrets_of  # lazy: already loaded

    student_specs = model_specs(config, config.model, config.base_url)
    reflect_url = config.reflection_base_url or config.base_url
    if config.reflector == config.model and reflect_url == config.base_url:
        pool = open_model_pool(config, student_specs, config.served_local)
        return pool, pool, secrets_of(student_specs)
    reflect_specs = model_specs(config, config.reflector, reflect_url)
    return (open_model_pool(config, student_specs, config.served_local),
            open_model_pool(config, reflect_specs, config.reflection_served_local),
            secrets_of(student_specs + reflect_specs))


def eval_command(config: GepaConfig, prompt: str) -> str:
    """`prime eval run ENV -m MODEL [-b/-k/-e] -a '{"system_prompt": ...}'`, ready to paste."""
    # JSON escapes C0 controls itself; json_visible escapes DEL and C1 too, so the command holds no raw control
    args = json_visible(json.dumps({**config.env_args, "system_prompt": prompt}, ensure_ascii=False))
    return shlex.join(["prime", "eval", "run", config.env_id, *model_flags(config), "-a", args])


def model_flags(config: GepaConfig) -> list[str]:
    """-m, -b, -k, -e for the student as the user gave them (`-m local` for the embedded model)."""
    from prime_cli.clients.command_flags import model_flags as flags  # lazy: already loaded

    return flags(config.model, config.base_url, config.api_key_var, config.endpoints_path,
                 local=config.builtin_name or False)


def resume_command(config: GepaConfig, run_dir: Path, outcome: Outcome | None = None) -> str:
    """`prime gepa run ENV -R RUN_DIR`: the run's saved config supplies every other setting; a run stopped by
    --max-cost is resumed with a higher cap (its own would stop it again at once)."""
    cap = outcome.resume_max_cost if outcome is not None else None
    return shlex.join(["prime", "gepa", "run", config.env_id, "-R", str(run_dir.resolve()),
                       *(["--max-cost", f"{cap:.2f}"] if cap is not None else [])])


def system_prompt_argument(env_id: str) -> str | None:
    """How the environment takes a system prompt: "text" (a `system_prompt` argument of load_environment),
    "file" (a verifiers v1 taskset: its config's `system_prompt` is a file to read), or None."""
    try:
        module = vf.loader.import_environment_module(env_id)
        factory = getattr(module, "load_environment", None)
        if factory is None:
            from prime_cli.envs.v1.loading import exported_tasksets  # lazy: start-up

            return "file" if exported_tasksets(module) else None
        params = inspect.signature(factory).parameters
    except Exception:  # noqa: BLE001 - only decides which hint to print
        return None
    return "text" if "system_prompt" in params or any(p.kind is p.VAR_KEYWORD for p in params.values()) else None


def picked_over_leader(outcome: Outcome) -> bool:
    """The final pick chose another candidate than the leader by validation."""
    pick = outcome.pick or {}
    return pick.get("best") is not None and pick.get("best") != pick.get("leader_by_validation")


def print_result(outcome: Outcome, config: GepaConfig, run_dir: Path | None, stream: IO[str]) -> None:
    best, seed = outcome.best, outcome.state.candidates[0]
    rows = sum(s is not None for s in best.val_scores)
    score = outcome.state.score_of(best)
    estimated = rows < len(best.val_scores) and score != best.val_mean
    seed_ci, best_ci = bracket(seed.val_scores), ("" if estimated else bracket(best.val_scores))
    if estimated:
        leader = validated_leader(outcome.state.val_scores, [c.val_rows_run for c in outcome.state.candidates])
        rows_note = (f"run on {rows} of {len(best.val_scores)} validation rows, where it scored "
                     f"{format_score(best.val_mean)}: scored over all of them as candidate {leader}'s mean plus its "
                     f"paired lead on those rows; ")
    else:
        rows_note = f"{'95% intervals over ' if seed_ci or best_ci else ''}{rows} validation rows, "
    out = [f"GEPA {outcome.status}: {len(outcome.state.candidates)} candidate(s), "
           f"{outcome.total_metric_calls}/{config.max_calls} rollouts of budget used"
           + (f" (+{outcome.test_metric_calls} for the test set)" if outcome.test_metric_calls else ""),
           f"validation score: seed {format_score(seed.val_mean)}{seed_ci} -> best {format_score(score)}{best_ci} "
           f"(candidate {best.idx}; {rows_note}"
           + (("the best was chosen on that lead: it is optimistic)" if estimated else
               "on which the best was chosen: its score there is optimistic)")
              if not picked_over_leader(outcome) else
              f"where candidate {outcome.pick['leader_by_validation']} led: the final pick chose {best.idx} on fresh "
              "rollouts of the rows where they disagree)")]
    if line := errored_line(outcome.errored_rollouts):
        out.append(line)
    if outcome.stop_reason:
        out.append(f"stopped before the budget: {outcome.stop_reason}")
    if text := cost_text(outcome.cost):
        out.append(f"cost: {text}")
    if outcome.best_test_score is not None:
        out.append(f"held-out test score ({config.num_test} rows): seed {format_score(outcome.seed_test_score)} -> "
                   f"best {format_score(outcome.best_test_score)}")
        if (paired := test_difference(outcome.seed_test_scores, outcome.best_test_scores)) is not None:
            out.append("  best vs seed on the test rows: " + verdict(paired))
    out += ["", "Best system prompt:", "-" * 40, best.prompt, "-" * 40]
    form = system_prompt_argument(config.env_id)
    if form == "text":
        out.append("Use it: " + eval_command(config, best.prompt))
    elif form == "file" and run_dir is not None:
        out.append("Use it: " + eval_command(config, str((run_dir / "best_prompt.txt").resolve())))
    else:
        out.append(f"Use it as the system prompt of {config.env_id}'s environment.")
    if run_dir is not None:
        out.append(f"Run directory: {run_dir}")
        if outcome.status != RunStatus.COMPLETED:
            out.append(f"Resume with: {resume_command(config, run_dir, outcome)}")
        elif ReflectionsExhausted(config.max_reflection_failures).holds(SearchPoint.of(outcome.state, outcome.total_metric_calls)):
            more = str(max(2 * config.max_reflection_failures, outcome.state.fruitless_reflections + 1))
            out.append("To let the reflection model try more often: "
                       + shlex.join([*shlex.split(resume_command(config, run_dir)), "--max-reflection-failures", more])
                       + " (or a stronger -M, or a larger max_tokens in --reflection-sampling-args, in a new run)")
    stream.write(visible("\n".join(out), multiline=True) + "\n")  # the prompt and stop reason are models' words
    stream.flush()


def print_unscored(outcome: Outcome, config: GepaConfig, run_dir: Path | None, stream: IO[str]) -> None:
    """A run stopped before the seed prompt was scored: what is kept, and how to go on."""
    out = [f"GEPA {outcome.status} before the seed prompt was scored (the rollouts already made are kept "
           f"for the resumed run); best_prompt.txt holds the seed prompt"]
    if text := cost_text(outcome.cost):
        out.append(f"cost: {text}")
    if run_dir is not None:
        out += [f"Run directory: {run_dir}", f"Resume with: {resume_command(config, run_dir, outcome)}"]
    stream.write("\n".join(out) + "\n")
    stream.flush()


def errored_line(record: dict[str, int]) -> str | None:
    """`errored rollouts left out (never scored 0): 12 of 84 (train 6, val 4, test 2)`; None without any."""
    if not record.get("left_out"):
        return None
    splits = ", ".join(f"{split} {record[split]}" for split in ("train", "val", "test") if record.get(split))
    return (f"errored rollouts left out (counted, never scored 0): {record['left_out']} of {record['rollouts']} "
            f"({splits}); candidates were compared on the rows they were scored on, and none that errored on "
            "more than half of its minibatch or validation rollouts (and more than its parent) was accepted")


def print_json_result(outcome: Outcome, config: GepaConfig, run_dir: Path | None, stream: IO[str]) -> None:
    """--json: the `done` event, last on stdout."""
    best = outcome.best if outcome.state.candidates else None
    seed = outcome.state.candidates[0] if outcome.state.candidates else None
    event = {"event": "done", "env_id": config.env_id, "status": outcome.status, "error": outcome.error,
             "run_dir": str(run_dir) if run_dir else None, "total_metric_calls": outcome.total_metric_calls,
             "max_calls": config.max_calls, "num_candidates": len(outcome.state.candidates),
             "seed_score": seed.val_mean if seed else None, "best_score": outcome.state.score_of(best) if best else None,
             "best_idx": best.idx if best else None, "best_prompt": best.prompt if best else None,
             "seed_test_score": outcome.seed_test_score, "best_test_score": outcome.best_test_score,
             "seed_ci95": bounds(seed.val_scores) if seed else None, "best_ci95": bounds(best.val_scores) if best else None,
             "test_difference": paired_record(test_difference(outcome.seed_test_scores, outcome.best_test_scores)),
             "stop_reason": outcome.stop_reason, "errored_rollouts": outcome.errored_rollouts, "cost": outcome.cost,
             "stages": outcome.stages,
             "resume_command": resume_command(config, run_dir, outcome) if run_dir and outcome.status != RunStatus.COMPLETED else None}
    stream.write(json_visible(json.dumps(event, ensure_ascii=False)) + "\n")
    stream.flush()


def seed_rollouts_left(evaluator: Evaluator, state: SearchState, seed_text: str) -> int:
    """Rollouts the seed's validation pass still needs (none once it is scored; fewer when resumed)."""
    if state.candidates:
        return 0
    keys = evaluator.keys(seed_text, "val", range(len(evaluator.splits["val"])))
    return sum(1 for key in keys if key not in evaluator.cache)


def background_slots(config: GepaConfig) -> int:
    """Rollout slots background work (the seed's test pass) may hold: it leaves room for a minibatch,
    so the search's next step does not wait behind it."""
    return max(1, config.max_concurrent - config.minibatch_size * config.rollouts_per_example)


def start_metadata(config: GepaConfig) -> GepaMetadata:
    return {"env_id": config.env_id, "env_args": config.env_args, "model": config.model,
            "reflection_model": config.reflector, "num_candidates": 0, "best_idx": None, "best_score": None,
            "total_metric_calls": 0, "max_calls": config.max_calls, "seed_val_score": None,
            "seed_test_score": None, "best_test_score": None,
            "config": config.as_given()}


def warn(display: Any, line: str) -> None:
    logger.warning("%s", line)
    display.message(line, "warning")


async def run_search(config: GepaConfig, resume: bool, stream: IO[str], *, pools: tuple[Any, Any] | None = None,
                     on_commit: Callable[[dict[str, Any]], None] | None = None,
                     inputs: SearchInputs | None = None, stages: Stages | None = None,
                     window: ContextWindow | None = None) -> tuple[Outcome, Path | None]:
    stages = stages or Stages(from_process_start=False)
    from prime_cli.runs.ids import new_run_id  # lazy: start-up
    from prime_cli.runs.log import run_log  # lazy: start-up

    if inputs is None:
        stages.begin("load_s")
        inputs = load_inputs(config)
        stages.end("load_s")
    stages.begin("setup_s")
    env, seed_text, splits = inputs.env, inputs.seed_text, inputs.splits
    secrets: list[str] = []
    if pools is None:
        student, reflector, secrets = open_pools(config)
    else:
        student, reflector = pools
    if resume:
        run, state = GepaRunDir.open(Path(config.run_dir))  # type: ignore[arg-type]
        run.write_metadata(status=RunStatus.RUNNING, completed_at=None, error=None, max_calls=config.max_calls,
                           config=config.as_given())
    else:
        path = Path(config.run_dir) if config.run_dir else default_base(config.env_id, config.model) / new_run_id()
        run = GepaRunDir.create(path, start_metadata(config))
        state = SearchState(seed=config.seed, num_train=len(splits.train))
        run.save_start(state, seed_text)
    display = make_display(config.display, stream)
    cache = RolloutCache(run.rollouts_path)
    meter = open_meter(config, run, cache)
    display.spend = lambda: meter.shown_spend
    evaluator = Evaluator(env, {"train": splits.train, "val": splits.val, "test": splits.test}, student, cache,
                          rollouts_per_example=config.rollouts_per_example, max_concurrent=config.max_concurrent,
                          sampling_args=config.student_sampling_args(), state_columns=list(config.state_columns),
                          on_rollout=estimating(meter, config.max_calls, display.message, display.rollout_done),
                          background_limit=background_slots(config), meter=meter,
                          state_check=StateColumnCheck(list(config.state_columns), lambda line: warn(display, line)))
    engine = GepaEngine(config, evaluator, state, reflector, seed_text, run=run, display=display,
                        metric_names=env.rubric.get_reward_func_names(), on_commit=on_commit, stages=stages,
                        window=window)
    task = asyncio.current_task()
    assert task is not None
    ctrl_c = CtrlC(engine.drain, task.cancel, display.message)  # the first drains, the second cancels
    ctrl_c.install()
    try:
        with run_log(run.layout.log_path, secrets), display:
            engine.window.log()
            if not seed_text:
                display.message("the environment has no system prompt: optimising from an empty one", "warning")
                logger.warning("%s has no system prompt; GEPA starts from an empty one", config.env_id)
            display.start(env_id=config.env_id, model=config.model, reflector=config.reflector,
                          max_calls=config.max_calls, run_dir=str(run.path), used=len(state.charged),
                          seed_rollouts=seed_rollouts_left(evaluator, state, seed_text))
            stages.end("setup_s")
            outcome = await engine.run()
        outcome.cost = meter.record()
        stages.end("finish_s")
        outcome.stages = stages.record()
        run.write_metadata(cost=outcome.cost, stages=outcome.stages)
        if meter.cap_reached:
            outcome.resume_max_cost = meter.suggested_cap(config.max_calls, outcome.total_metric_calls)
            outcome.error = stop_line(meter, resume_command(config, run.path, outcome), config.max_calls,
                                      outcome.total_metric_calls)
    finally:
        ctrl_c.remove()
        cache.close()
        if pools is None:
            for pool in {id(student): student, id(reflector): reflector}.values():
                await pool.aclose()
    return outcome, run.path


def run_gepa(target: str | None, values: dict[str, Any], stream: IO[str] | None = None, *,
             resume: bool = False, verbose: bool = False) -> int:
    """Run (or resume) one GEPA search; 0 completed, 1 cancelled or failed. Bad input raises EnvConfigError.
    `resume`: -R, the run folder in values["run_dir"] must be a GEPA run (target may then be None).
    `verbose`: -v, the stage breakdown (where the wall time went) is printed after the result."""
    stream = stream or sys.stdout
    stages = Stages()
    stages.begin("load_s")
    config, resume = resolve_config(target, values, resume=resume)
    inputs = preflight(config)  # bad input fails here: before the local model starts, before any request
    stages.end("load_s")
    builtins = config.local_models()
    if not builtins:
        return _finish(config, resume, stream, inputs, stages, verbose)
    check_before_local_start(config, inputs)
    from prime_cli.serve.local import local_endpoint  # lazy: start-up
    from prime_cli.serve.startup_status import local_server_status  # lazy: start-up

    stages.begin("local_server_s")
    with local_server_status() as (status, tick), contextlib.ExitStack() as stack:
        endpoints = {name: stack.enter_context(local_endpoint(status, tick, model=name)) for name in builtins}
        servers = {name: (endpoint.model, endpoint.url) for name, endpoint in endpoints.items()}
        stages.end("local_server_s")
        return _finish(config.on_local_servers(servers), resume, stream, inputs, stages, verbose)


def fitted_window(config: GepaConfig, inputs: SearchInputs) -> ContextWindow:
    """The reflection model's context, once its server runs; a run whose shortest reflection prompt cannot
    fit it is refused here (EnvConfigError), before the seed is scored and before anything is written."""
    specs = model_specs(config, config.reflector, config.reflection_base_url or config.base_url)
    window = reflection_window(specs, config.reflector, config.reflection_max_tokens())
    check_fits(window, config, inputs.env, inputs.seed_text, inputs.splits.train,
               inputs.env.rubric.get_reward_func_names())
    return window


def check_before_local_start(config: GepaConfig, inputs: SearchInputs) -> None:
    """A built-in reflection model whose server this run would start: its context is the one `prime serve`
    starts it with, so a run that cannot fit is refused before minutes of starting (as fitted_window would)."""
    from prime_cli.clients.command_flags import is_local_model  # lazy: already loaded

    name = config.reflector
    if not is_local_model(name) or config.reflection_base_url:
        return
    from dataclasses import fields  # lazy: already loaded

    from prime_cli.serve.builtin_models import served_name  # lazy: start-up
    from prime_cli.serve.local import running_servers  # lazy: start-up
    from prime_cli.serve.paths import models_dir  # lazy: start-up
    from prime_cli.serve.server import ServerOptions  # lazy: start-up

    served = served_name(name)
    if any(name == "local" or served in record["models"] for record in running_servers()):
        return  # a running server: fitted_window asks it, at once
    context = next(f.default for f in fields(ServerOptions) if f.name == "max_model_len")
    window = ContextWindow(served, context, config.reflection_max_tokens(), "the context prime serve starts it with",
                           load_tokenizer(str(models_dir() / served.lower())))
    check_fits(window, config, inputs.env, inputs.seed_text, inputs.splits.train,
               inputs.env.rubric.get_reward_func_names())


def _finish(config: GepaConfig, resume: bool, stream: IO[str], inputs: SearchInputs, stages: Stages,
            verbose: bool) -> int:
    window = fitted_window(config, inputs)
    outcome, run_dir = asyncio.run(run_search(config, resume, stream, inputs=inputs, stages=stages, window=window))
    if config.display == "json":
        print_json_result(outcome, config, run_dir, stream)
    elif outcome.state.candidates:
        print_result(outcome, config, run_dir, stream)
    else:
        print_unscored(outcome, config, run_dir, stream)
    if verbose and config.display != "json" and outcome.stages:
        stream.write(stages_line(outcome.stages) + "\n")
        stream.flush()
    if outcome.error:
        print(f"error: {visible(outcome.error, multiline=True)}", file=sys.stderr)
    return 0 if outcome.status == RunStatus.COMPLETED else 1


__all__ = ["EnvConfigError", "resolve_config", "run_gepa", "run_search"]
