"""prime gepa run vs the `gepa` package (0.1.4) on simulated task families, at equal concurrency.

    .venv/bin/python benchmarks/gepa_vs_gepa.py [--families sim edit format] [--budgets 150 300 600]
        [--seeds 0 1 ... 9] [--noise fresh|frozen] [--concurrency 8] [--parallel 1] [--speculate 0]
        [--baseline DIR] [--student-delay S] [--reflection-delay S] [--json PATH] [--no-bytecode-cache]
        [--no-gepa]

Task families (benchmarks/gepa_bench/families.py; each module's docstring states its rates):
- sim (sim.py, environment gepa-sim): rows "[category] word" whose answer is the word transformed by
  the category's rule; the student follows the first instruction about the row's category (the right
  one, or a wrong one: another rule's sentence naming the category) and echoes the word without one.
  The reflection model, for each category it is shown, forgets a missing instruction, adds a wrong one,
  or drops a wrong one at stated rates (sim.FORGET_PERCENT, WRONG_PERCENT, REMOVE_WRONG_PERCENT).
- edit (sim_edit.py, environment gepa-sim-edit; only here, in no default config or test fixture): the
  same rows and rules, plus harmful instructions that break some categories. The seed prompt carries one
  ("Answer in lowercase."); the reflection model sometimes adds one (ADD_HARMFUL_PERCENT), and removes
  one it is shown evidence against at REMOVE_HARMFUL_PERCENT, whatever the reflection prompt names.
  Both adding and removing instructions are needed. The report says which best prompts still carry them.
- format (sim_format.py, environment gepa-sim-format): the same content rules, and a format rule every
  answer needs ("Wrap every answer in <a> and </a>."; the seed prompt lacks it and scores 0); the
  reflection model forgets it, proposes a wrong format, or drops a wrong one at sim's rates.

Noise (--noise, benchmarks/gepa_bench/draws.py): fresh (the default) draws every random choice of the
scripted student and reflection models anew on every call (a real model sampled at temperature > 0: a
prompt scored twice on a row may get another answer); the n-th asking of a request draws a hash of (family
and seed, request, n), so the draws do not depend on the order requests arrive in: a rerun of the same
code repeats its scores (nearly: two identical requests in flight at once may swap answers), and prime
and gepa get the same answer the n-th time each asks the same thing (common random numbers); frozen makes each choice a hash of the request (the same request, the same
answer: what the benchmark did before issue 57, kept for comparison).

Flags: --seeds (default 0-9) and --budgets (default 150 300 600) set the grid; --parallel and
--speculate list prime's -P / --speculate values to compare; --baseline DIR runs the prime of another
checkout of this repository (e.g. a worktree of main) too, with the same -P / --speculate values,
interleaved seed by seed, for a before/after in one run; --no-gepa leaves the gepa package out (a
before/after of prime alone: with frozen noise at zero delays the two sides' --json rows then differ only
in wall_s and stages where the change keeps prime's choices); --student-delay / --reflection-delay set the
scripted server's latency per call (0 0: as fast as it goes, for the search logic alone); --json PATH
writes every run's numbers (best prompts too).

Both optimisers get the same train/validation/test rows, the same scripted student and reflection
models on one loopback server (a fresh one per run), the same minibatch size (3), perfect-score
skipping at 1.0, the same reflection max_tokens and the same number of student rollouts in flight.
gepa runs in its own venv (benchmarks/.venv-gepa, created on first use with `pip install gepa==0.1.4`).
Reported (Markdown on stdout; one line per run on stderr): per family, budget and optimiser the means
of the best candidate's validation score, its held-out test score (100 rows, scored under the same
noise) and the gap between them (val - test: how much the pick's score overstates it), the seed prompt's
test score, rollouts used (and the max, and how many runs passed the budget), candidates, model calls
and wall time (the whole command, test scoring included); the paired test-accuracy differences per
family and budget with their 95% interval and wins / ties / losses (benchmarks/gepa_bench/report.py
says how they are paired); for family edit, how many seeds' best prompts kept a harmful instruction.
At zero delays the default grid (3 families x 3 budgets x 10 seeds x prime and gepa) takes about 5
minutes on 2 cores (shared with other work); `make bench-gepa` runs it at the default delays, which
takes far longer. The scripted models' own checks: benchmarks/gepa_bench/test_scripted_models.py.

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
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks" / "gepa_bench"
GEPA_VENV = REPO / "benchmarks" / ".venv-gepa"
sys.path[:0] = [str(REPO), str(BENCH)]

import report  # noqa: E402
import sim  # noqa: E402
from draws import NOISE_KINDS  # noqa: E402
from families import FAMILIES, Family  # noqa: E402

from tests.support.scripted_server import ScriptedOpenAIServer  # noqa: E402

NUM_TRAIN, NUM_VAL, NUM_TEST, MINIBATCH = 100, 50, 100, 3
REFLECTION_ARGS = {"max_tokens": 160}


def ensure_gepa_venv() -> Path:
    python = GEPA_VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(GEPA_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "gepa==0.1.4"], check=True)
    return python


def splits(family: Family, seed: int) -> dict[str, list[dict]]:
    """The rows prime's GEPA takes (prime_cli.gepa.rows.make_splits), handed to gepa as well."""
    import prime_cli.envs as vf
    from prime_cli.gepa.rows import make_splits

    cwd = os.getcwd()
    os.chdir(BENCH)
    try:
        env = vf.load_environment(family.env_id)
        parts = make_splits(env, family.seed_prompt, NUM_TRAIN, NUM_VAL, NUM_TEST, seed)
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


def run_prime(family: Family, budget: int, concurrency: int, seed: int, out: Path, parallel: int, repo: Path = REPO,
              bytecode_cache: bool = True, speculate: int = 0, noise: str = "fresh") -> dict:
    with ScriptedOpenAIServer(family.server_reply(noise, seed)) as server:
        run_dir = out / f"prime-{family.name}-{budget}-{seed}-P{parallel}-S{speculate}-{abs(hash(str(repo)))}"
        env = prime_env(repo, out, bytecode_cache)
        start = time.perf_counter()
        result = subprocess.run(
            [sys.executable, "-m", "prime_cli", "gepa", "run", family.env_id, "-m", "student", "-M", "reflector",
             "-b", server.url, "-B", str(budget), "-n", str(NUM_TRAIN), "-N", str(NUM_VAL), "--num-test", str(NUM_TEST),
             "--minibatch-size", str(MINIBATCH), "--perfect-score", "1.0", "-c", str(concurrency), "--seed", str(seed),
             "--reflection-sampling-args", json.dumps(REFLECTION_ARGS), "-o", str(run_dir), "--plain",
             "-P", str(parallel), *(["--speculate", str(speculate)] if speculate else [])],
            cwd=BENCH, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"prime gepa failed:\n{result.stderr[-2000:]}")
    meta = json.loads((run_dir / "metadata.json").read_text())
    return {"seed": seed, "best_val": meta["best_score"], "test": meta["best_test_score"], "seed_test": meta["seed_test_score"],
            "metric_calls": meta["total_metric_calls"], "num_candidates": meta["num_candidates"], "wall_s": wall,
            "best_prompt": (run_dir / "best_prompt.txt").read_text(),
            "stages": meta.get("stages"), **sent(server)}  # where prime's wall time went (absent before it was recorded)


def run_gepa(family: Family, python: Path, budget: int, concurrency: int, seed: int, rows: dict, out: Path,
             noise: str = "fresh") -> dict:
    with ScriptedOpenAIServer(family.server_reply(noise, seed)) as server:
        spec = {"url": server.url, "budget": budget, "concurrency": concurrency, "seed": seed,
                "minibatch_size": MINIBATCH, "seed_prompt": family.seed_prompt, "reflection_sampling_args": REFLECTION_ARGS,
                **rows}
        spec_path = out / f"gepa-{family.name}-{budget}-{seed}.json"
        spec_path.write_text(json.dumps(spec))
        start = time.perf_counter()
        result = subprocess.run([str(python), str(BENCH / "run_gepa_pkg.py"), str(spec_path)], cwd=BENCH,
                                capture_output=True, text=True)
        wall = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"gepa failed:\n{result.stderr[-2000:]}")
    data = json.loads(result.stdout.strip().splitlines()[-1])
    data["wall_s"], data["seed"] = wall, seed
    data.update(sent(server))
    return data


def sent(server: ScriptedOpenAIServer) -> dict[str, int]:
    """Model calls the server answered (the budget counts distinct student rollouts of the search)."""
    models = [r["json"]["model"] for r in server.requests_to("/v1/chat/completions")]
    return {"student_calls": models.count("student"), "reflection_calls": models.count("reflector")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", choices=list(FAMILIES), default=list(FAMILIES))
    parser.add_argument("--budgets", type=int, nargs="+", default=[150, 300, 600])
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    parser.add_argument("--parallel", type=int, nargs="+", default=[1],
                        help="prime's -P values to compare (proposals in flight)")
    parser.add_argument("--speculate", type=int, nargs="+", default=[0],
                        help="prime's --speculate values to compare (0: off)")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="another checkout of this repository whose prime runs too, interleaved (before/after)")
    parser.add_argument("--student-delay", type=float, default=sim.STUDENT_DELAY,
                        help="seconds the scripted server spends on each student call")
    parser.add_argument("--reflection-delay", type=float, default=sim.REFLECTION_DELAY,
                        help="seconds the scripted server spends on each reflection call")
    parser.add_argument("--noise", choices=NOISE_KINDS, default="fresh",
                        help="the scripted models' noise: fresh per call, or frozen per request (draws.py)")
    parser.add_argument("--json", type=Path, default=None, help="also write every run's numbers to this file")
    parser.add_argument("--no-bytecode-cache", action="store_true",
                        help="run prime without a bytecode cache when PYTHONDONTWRITEBYTECODE is set")
    parser.add_argument("--no-gepa", action="store_true",
                        help="leave the gepa package out (prime against --baseline only)")
    args = parser.parse_args()
    sim.STUDENT_DELAY, sim.REFLECTION_DELAY = args.student_delay, args.reflection_delay
    python = None if args.no_gepa else ensure_gepa_venv()
    repos = {"prime": REPO, **({"baseline": args.baseline.resolve()} if args.baseline else {})}
    cache = not args.no_bytecode_cache
    several_p = len(args.parallel) > 1
    # (label, repo, -P, --speculate); a baseline older than --speculate fails on it with prime's error
    variants = [(name + (f" -P {p}" if several_p else "") + (f" -S {s}" if s else ""), repo, p, s)
                for p in args.parallel for s in args.speculate for name, repo in repos.items()]
    gepa = "gepa 0.1.4"
    runs: report.Runs = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gepa-bench-") as tmp:
        out = Path(tmp)
        if cache:
            for repo in repos.values():
                warm_bytecode(repo, out)
        for family in (FAMILIES[name] for name in args.families):
            rows = {seed: splits(family, seed) for seed in args.seeds}
            for budget in args.budgets:
                for label, *_ in variants:
                    runs[(family.name, budget, label)] = []
                if python is not None:
                    runs[(family.name, budget, gepa)] = []
                for seed in args.seeds:
                    for label, repo, p, s in variants:
                        run = run_prime(family, budget, args.concurrency, seed, out, p, repo, cache, s, args.noise)
                        runs[(family.name, budget, label)].append(run)
                        print(report.seed_line(family.name, budget, label, run, family.harmful), file=sys.stderr, flush=True)
                    if python is None:
                        continue
                    run = run_gepa(family, python, budget, args.concurrency, seed, rows[seed], out, args.noise)
                    runs[(family.name, budget, gepa)].append(run)
                    print(report.seed_line(family.name, budget, gepa, run, family.harmful), file=sys.stderr, flush=True)
    elapsed = time.perf_counter() - started
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps([{"family": f, "budget": b, "optimiser": name, **run}
                                         for (f, b, name), results in runs.items() for run in results], indent=1))
    primes = [label for label, *_ in variants if label.startswith("prime")]
    baselines = [label for label, *_ in variants if label.startswith("baseline")]
    with_gepa = python is not None
    pairs = [(label, gepa) for label in primes if with_gepa]
    pairs += [(label, label.replace("prime", "baseline", 1)) for label in primes if args.baseline]
    pairs += [(label, gepa) for label in baselines if with_gepa]
    delays = f"{args.noise} noise, student delay {args.student_delay} s, reflection delay {args.reflection_delay} s"
    print(f"\n### gepa_vs_gepa: families {' '.join(args.families)}, c={args.concurrency}, seeds {args.seeds}, {delays}"
          + (f", baseline {args.baseline}" if args.baseline else "") + f" ({elapsed:.0f} s)\n")
    print("Means over seeds:\n")
    print("\n".join(report.means_table(runs, gepa)))
    print("\nTest accuracy, paired by seed (paired t-test over seeds; won / tied / lost: seeds where the first "
          "optimiser scored higher / the same / lower):\n")
    print("\n".join(report.paired_table(runs, pairs)))
    for name in args.families:
        family = FAMILIES[name]
        if family.planted:
            print(f"\nFamily {name}: seeds whose best prompt still carries the planted / any harmful instruction:\n")
            print("\n".join(report.harmful_table(runs, name, family.harmful, family.planted)))


if __name__ == "__main__":
    main()
