"""prime gepa run vs the `gepa` package (0.1.4) on a simulated task suite, at equal concurrency.

    .venv/bin/python benchmarks/gepa_vs_gepa.py [--budgets 150 300 600] [--concurrency 8] [--seeds 0 1]
        [--parallel 1 4] [--speculate 0 2] [--baseline DIR]  # DIR: another checkout, e.g. of HEAD~1

Both optimisers get the same train/validation/test rows, the same scripted student and reflection
models on one loopback server (benchmarks/gepa_bench/sim.py says what is simulated), the same
minibatch size (3), perfect-score skipping at 1.0, the same reflection max_tokens and the same
number of student rollouts in flight. gepa runs in its own venv (benchmarks/.venv-gepa, created
on first use with `pip install gepa==0.1.4`). Reported per budget: best validation score, held-out
test score (100 rows), budget used, and wall time (the whole command, test scoring included).

Bytecode: gepa's venv holds .pyc files (pip compiles on install). prime runs with a bytecode cache
too (PYTHONPYCACHEPREFIX in the temporary folder, filled by an untimed import before the first
timed run), as it would after any first run: where PYTHONDONTWRITEBYTECODE is set, as in some
sandboxes, it would otherwise recompile openai and pydantic from source on every start (seconds).
--no-bytecode-cache measures that case.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks" / "gepa_bench"
GEPA_VENV = REPO / "benchmarks" / ".venv-gepa"
sys.path[:0] = [str(REPO), str(BENCH)]

import sim  # noqa: E402

from tests.support.scripted_server import ScriptedOpenAIServer  # noqa: E402

NUM_TRAIN, NUM_VAL, NUM_TEST, MINIBATCH = 100, 50, 100, 3
REFLECTION_ARGS = {"max_tokens": 160}


def ensure_gepa_venv() -> Path:
    python = GEPA_VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(GEPA_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "gepa==0.1.4"], check=True)
    return python


def splits(seed: int) -> dict[str, list[dict]]:
    """The rows prime's GEPA takes (prime_cli.gepa.rows.make_splits), handed to gepa as well."""
    import prime_cli.envs as vf
    from prime_cli.gepa.rows import make_splits

    cwd = os.getcwd()
    os.chdir(BENCH)
    try:
        env = vf.load_environment("gepa-sim")
        parts = make_splits(env, sim.SEED_PROMPT, NUM_TRAIN, NUM_VAL, NUM_TEST, seed)
    finally:
        os.chdir(cwd)
    plain = lambda rows: [{"question": r["prompt"][-1]["content"], "answer": r["answer"]} for r in rows]  # noqa: E731
    return {"train": plain(parts.train), "val": plain(parts.val), "test": plain(parts.test)}


def prime_env(repo: Path, out: Path, bytecode_cache: bool) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(repo))
    if bytecode_cache:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(out / "pycache")
    return env


def warm_bytecode(repo: Path, out: Path) -> None:
    """Fill the bytecode cache with what `prime gepa run` imports (untimed)."""
    code = ("import prime_cli.cli.main, prime_cli.gepa.api, prime_cli.clients.endpoints, prime_cli.runs.log, "
            "prime_cli.evals.store, openai")
    subprocess.run([sys.executable, "-c", code], cwd=BENCH, env=prime_env(repo, out, True), check=True)


def run_prime(budget: int, concurrency: int, seed: int, out: Path, parallel: int, repo: Path = REPO,
              bytecode_cache: bool = True, speculate: int = 0) -> dict:
    with ScriptedOpenAIServer(sim.server_reply) as server:
        run_dir = out / f"prime-{budget}-{seed}-P{parallel}-S{speculate}-{abs(hash(str(repo)))}"
        env = prime_env(repo, out, bytecode_cache)
        start = time.perf_counter()
        result = subprocess.run(
            [sys.executable, "-m", "prime_cli", "gepa", "run", "gepa-sim", "-m", "student", "-M", "reflector",
             "-b", server.url, "-B", str(budget), "-n", str(NUM_TRAIN), "-N", str(NUM_VAL), "--num-test", str(NUM_TEST),
             "--minibatch-size", str(MINIBATCH), "--perfect-score", "1.0", "-c", str(concurrency), "--seed", str(seed),
             "--reflection-sampling-args", json.dumps(REFLECTION_ARGS), "-o", str(run_dir), "--plain",
             "-P", str(parallel), *(["--speculate", str(speculate)] if speculate else [])],
            cwd=BENCH, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"prime gepa failed:\n{result.stderr[-2000:]}")
    meta = json.loads((run_dir / "metadata.json").read_text())
    return {"best_val": meta["best_score"], "test": meta["best_test_score"], "seed_test": meta["seed_test_score"],
            "metric_calls": meta["total_metric_calls"], "num_candidates": meta["num_candidates"], "wall_s": wall,
            **sent(server)}


def run_gepa(python: Path, budget: int, concurrency: int, seed: int, rows: dict, out: Path) -> dict:
    with ScriptedOpenAIServer(sim.server_reply) as server:
        spec = {"url": server.url, "budget": budget, "concurrency": concurrency, "seed": seed,
                "minibatch_size": MINIBATCH, "seed_prompt": sim.SEED_PROMPT, "reflection_sampling_args": REFLECTION_ARGS,
                **rows}
        spec_path = out / f"gepa-{budget}-{seed}.json"
        spec_path.write_text(json.dumps(spec))
        start = time.perf_counter()
        result = subprocess.run([str(python), str(BENCH / "run_gepa_pkg.py"), str(spec_path)], cwd=BENCH,
                                capture_output=True, text=True)
        wall = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"gepa failed:\n{result.stderr[-2000:]}")
    data = json.loads(result.stdout.strip().splitlines()[-1])
    data["wall_s"] = wall
    data.update(sent(server))
    return data


def sent(server: ScriptedOpenAIServer) -> dict[str, int]:
    """Model calls the server answered (the budget counts distinct student rollouts of the search)."""
    models = [r["json"]["model"] for r in server.requests_to("/v1/chat/completions")]
    return {"student_calls": models.count("student"), "reflection_calls": models.count("reflector")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", type=int, nargs="+", default=[150, 300, 600])
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--parallel", type=int, nargs="+", default=[1, 4],
                        help="prime's -P values to compare (proposals in flight)")
    parser.add_argument("--speculate", type=int, nargs="+", default=[0],
                        help="prime's --speculate values to compare (0: off)")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="another checkout of this repository whose prime runs too, interleaved (before/after)")
    parser.add_argument("--student-delay", type=float, default=sim.STUDENT_DELAY,
                        help="seconds the scripted server spends on each student call")
    parser.add_argument("--reflection-delay", type=float, default=sim.REFLECTION_DELAY,
                        help="seconds the scripted server spends on each reflection call")
    parser.add_argument("--no-bytecode-cache", action="store_true",
                        help="run prime without a bytecode cache when PYTHONDONTWRITEBYTECODE is set")
    args = parser.parse_args()
    sim.STUDENT_DELAY, sim.REFLECTION_DELAY = args.student_delay, args.reflection_delay
    python = ensure_gepa_venv()
    repos = {"prime": REPO, **({"baseline": args.baseline.resolve()} if args.baseline else {})}
    cache = not args.no_bytecode_cache
    table = []
    with tempfile.TemporaryDirectory(prefix="gepa-bench-") as tmp:
        out = Path(tmp)
        if cache:
            for repo in repos.values():
                warm_bytecode(repo, out)
        for budget in args.budgets:
            variants = [(f"{name} -P {p}" + (f" -S {s}" if s else ""), repo, p, s)
                        for p in args.parallel for s in args.speculate for name, repo in repos.items()
                        if not (s and name == "baseline")]
            runs: dict[str, list[dict]] = {label: [] for label, *_ in variants}
            runs["gepa 0.1.4"] = []
            for seed in args.seeds:
                rows = splits(seed)
                for label, repo, p, s in variants:
                    runs[label].append(run_prime(budget, args.concurrency, seed, out, p, repo, cache, s))
                runs["gepa 0.1.4"].append(run_gepa(python, budget, args.concurrency, seed, rows, out))
            for name, results in runs.items():
                mean = lambda key: statistics.mean(r[key] for r in results)  # noqa: E731,B023
                table.append((budget, name, mean("best_val"), mean("seed_test"), mean("test"), mean("metric_calls"),
                              mean("num_candidates"), mean("student_calls"), mean("reflection_calls"), mean("wall_s")))
                print(f"budget {budget} {name}: " + json.dumps(results), file=sys.stderr, flush=True)
    print(f"\nsimulated task suite, c={args.concurrency}, seeds {args.seeds} (means)\n")
    gepa_wall = {row[0]: row[-1] for row in table if row[1].startswith("gepa")}
    print("| budget | optimiser | best val | seed test | best test | rollouts used | candidates | student calls sent "
          "| reflection calls | wall s | wall / gepa |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for budget, name, val, seed_test, test, calls, cands, student, reflections, wall in table:
        print(f"| {budget} | {name} | {val:.3f} | {seed_test:.3f} | {test:.3f} | {calls:.0f} | {cands:.1f} | {student:.0f} "
              f"| {reflections:.1f} | {wall:.1f} | {wall / gepa_wall[budget]:.2f} |")


if __name__ == "__main__":
    main()
