"""Run one verifiers environment, copied unchanged, under verifiers' own vf-eval and under prime.

    with ScriptedOpenAIServer(parity_reply) as server:
        case = CASES["gsm8k"]
        vf = vf_eval("v0.2.0", case, tmp_path / "vf", server.url)        # {(example_id, k): reward}
        prime = prime_eval("v0.2.0", case, tmp_path / "prime", server.url)
        check = prime_check("v0.2.0", case, tmp_path / "check")

The environments are tests/fixtures/verifiers_envs/<tag>/<name>/ (verifiers' environments/ at that tag).
Each run gets a fresh cwd with the fixture as ./environments/<name>/. Both tools run with
tests/support/parity_rows on PYTHONPATH (its sitecustomize.py serves local rows for hub datasets) and
against the same scripted server, so the same conversation gets the same reply. vf-eval runs from a side
venv per verifiers version (benchmarks/.venv-verifiers-<version>, made on first use by
benchmarks/eval_peers.ensure_venv: about 1 minute each) and imports the environment from its folder
(on PYTHONPATH), which is how that vf-eval finds a module; `prime` is the script of the running venv.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.cli import PRIME, REPO, prime_env

FIXTURES = REPO / "tests" / "fixtures" / "verifiers_envs"
ROWS_DIR = REPO / "tests" / "support" / "parity_rows"
BENCH = REPO / "benchmarks"
TAGS = ("v0.1.9.post3", "v0.2.0")
KEY_VAR = "PARITY_API_KEY"
MODEL = "parity-policy"


def judge(url: str, base_key: str = "judge_base_url") -> dict[str, Any]:
    return {base_key: url, "judge_model": MODEL}


@dataclass(frozen=True)
class Case:
    env: str
    n: int = 4
    r: int = 2
    env_args: Callable[[str], dict[str, Any]] = field(default=lambda url: {})
    key_vars: tuple[str, ...] = ()  # variables the environment reads its judge's key from
    vf_flags: dict[str, tuple[str, ...]] = field(default_factory=dict)  # extra vf-eval flags, by tag


CASES = {c.env: c for c in [
    Case("alphabet_sort"),
    # verifiers 0.2.0 deprecates message_type: a completion task needs the completions client named
    Case("continuation_quality", env_args=judge, key_vars=("OPENAI_API_KEY",),
         vf_flags={"v0.2.0": ("--api-client-type", "openai_completions")}),
    Case("doublecheck"),
    Case("gsm8k"),
    Case("math_group"),
    Case("mmmu"),
    Case("reverse_text"),
    Case("self_reward", env_args=lambda url: judge(url, "base_url"), key_vars=("JUDGE_API_KEY",)),
    Case("sentence_repeater"),
    Case("tool_test", env_args=lambda url: {"num_train_examples": 8, "num_eval_examples": 8}),
    Case("toxicity_explanation", env_args=judge, key_vars=("OPENAI_API_KEY",)),
]}


# Problems `prime env check` reports that are true of the environment as written (judged by reading
# its code); any other problem is a false alarm and fails the test.
TRUE_PROBLEMS = {
    # LCS ratio pays a 3-character prefix 2*3/(3+n), more than its share 3/n of the answer's length
    "reverse_text": ("brevity is paid",),
    # SIMPLE_PROMPT asks for <reasoning>/<answer> but MathRubric's parser reads \boxed{}: an answer
    # written only as the prompt asks scores 0
    "doublecheck": ("the prompt asks for <reasoning> but the parser does not read",
                    "the prompt asks for <answer> but the parser does not read"),
}


# Where prime differs from vf-eval by design. self_reward's JudgeRubric has no reward function (verifiers'
# JudgeRubric adds none and the environment adds none): vf-eval scores every rollout 0.0 without a word;
# prime refuses the environment at load with one line (issue 55: a rubric with no reward functions is
# refused), exit 2, in eval run and env check alike.
REFUSED = {"self_reward": "the rubric has no reward function"}


def false_problems(name: str, problems: list[str]) -> list[str]:
    """The problems of `prime env check` on `name` that TRUE_PROBLEMS does not list: false alarms."""
    return [p for p in problems if not any(known in p for known in TRUE_PROBLEMS.get(name, ()))]


def version(tag: str) -> str:
    return tag.removeprefix("v")


def verifiers_venv(tag: str) -> Path:
    """benchmarks/.venv-verifiers-<version>: that verifiers release from PyPI (with its own datasets,
    math-verify, openai) and pillow (mmmu); built once, then cached (a stamp file)."""
    sys.path.insert(0, str(BENCH))
    try:
        from eval_peers import ensure_venv
    finally:
        sys.path.remove(str(BENCH))
    venv = BENCH / f".venv-verifiers-{version(tag)}"
    ensure_venv(venv, [f"verifiers=={version(tag)}", "pillow"])
    return venv


def workdir(tag: str, case: Case, cwd: Path) -> Path:
    """`cwd` with the unchanged fixture as ./environments/<name>/."""
    target = cwd / "environments" / case.env
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(FIXTURES / tag / case.env, target)
    return target


def child_env(case: Case, extra_path: list[Path] = ()) -> dict[str, str]:
    env = prime_env({KEY_VAR: "parity-key", "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1",
                     "PYTHONPATH": os.pathsep.join(str(p) for p in [ROWS_DIR, *extra_path])})
    for name in case.key_vars:
        env[name] = "parity-key"
    env.pop("VIRTUAL_ENV", None)
    return env


def read_rewards(results: Path) -> dict[tuple[int, int], float]:
    """Per-rollout rewards keyed by (example_id, k): the k-th rollout of that example in file order."""
    seen: dict[int, int] = defaultdict(int)
    rewards = {}
    for line in results.read_text().splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        example = int(row["example_id"])
        rewards[(example, seen[example])] = float(row["reward"]) if row.get("reward") is not None else float("nan")
        seen[example] += 1
    return rewards


@dataclass
class Run:
    returncode: int
    output: str
    rewards: dict[tuple[int, int], float]
    seconds: float = 0.0

    def tail(self, lines: int = 15) -> str:
        return "\n".join(self.output.splitlines()[-lines:])


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float) -> tuple[subprocess.CompletedProcess, float]:
    import time

    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    return done, time.perf_counter() - start


def _newest_results(folder: Path) -> Path | None:
    found = sorted(folder.rglob("results.jsonl"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def eval_args(case: Case, url: str) -> list[str]:
    return [case.env, "-m", MODEL, "-b", url, "-k", KEY_VAR, "-n", str(case.n), "-r", str(case.r), "-s",
            "-a", json.dumps(case.env_args(url))]


def vf_eval(tag: str, case: Case, cwd: Path, url: str, timeout: float = 300) -> Run:
    env_dir = workdir(tag, case, cwd)
    vf = verifiers_venv(tag) / "bin" / "vf-eval"
    done, seconds = _run([str(vf), *eval_args(case, url), *case.vf_flags.get(tag, ())], cwd, child_env(case, [env_dir]), timeout)
    results = _newest_results(cwd)
    rewards = read_rewards(results) if done.returncode == 0 and results else {}
    return Run(done.returncode, done.stdout + done.stderr, rewards, seconds)


def prime_eval(tag: str, case: Case, cwd: Path, url: str, timeout: float = 300) -> Run:
    workdir(tag, case, cwd)
    done, seconds = _run([str(PRIME), "eval", "run", *eval_args(case, url)], cwd, child_env(case), timeout)
    results = _newest_results(cwd)
    rewards = read_rewards(results) if results else {}
    return Run(done.returncode, done.stdout + done.stderr, rewards, seconds)


@dataclass
class Check:
    returncode: int
    output: str
    report: dict[str, Any] | None

    @property
    def problems(self) -> list[str]:
        return list((self.report or {}).get("problems") or [])


def prime_check(tag: str, case: Case, cwd: Path, url: str, timeout: float = 300) -> Check:
    workdir(tag, case, cwd)
    done, _ = _run([str(PRIME), "env", "check", case.env, "-a", json.dumps(case.env_args(url)), "--json"], cwd,
                   child_env(case), timeout)
    try:  # stdout is the report alone, even for an environment that prints while loading (alphabet_sort)
        report = json.loads(done.stdout)
    except ValueError:
        report = None
    return Check(done.returncode, done.stdout + done.stderr, report)


# verifiers' v1 API (verifiers.v1 tasksets): tests/fixtures/verifiers_envs/a60a606/ (verifiers' environments/
# at commit a60a606ec...) under vf-eval 0.4.0, the release that has only that API. 0.4.0 imports a taskset by
# its id as a module (`reverse_text` or `reverse-text` -> `import reverse_text`, after `verifiers.v1.tasksets.<id>`),
# so the fixture's folder on PYTHONPATH is enough: no install. Its defaults do not fit a local run (the `bash`
# coding-agent harness, the remote `prime` runtime, pushing to the platform), so every agent seat of the env
# gets the `null` harness (one chat program per rollout, run by `uv run --script`; MCP tools come from the
# taskset) and the `subprocess` runtime, with --no-push --no-rich. Results: <output_dir>/<run.dir>/traces.jsonl,
# one episode a line (task.data.idx, ok, errors, traces[]: each trace's rewards {name: {score, weight}}).
V1_COMMIT = "a60a606"
V1_VERSION = "0.4.0"
# datasets (reverse_text, gsm8k, alphabet_sort load hub rows) and pillow (color_codeword) are the fixtures'
# own dependencies that verifiers 0.4.0 does not bring; uv runs the null harness's chat program and gsm8k's
# verify.py (the harness finds it on PATH, else downloads one into ~/.local/bin).
V1_PACKAGES = (f"verifiers=={V1_VERSION}", "uv", "datasets", "pillow")
V1_RUN_DIR = "parity"


@dataclass(frozen=True)
class V1Case:
    env: str  # the fixture folder: also the taskset id vf-eval is given
    n: int = 4
    r: int = 2
    roles: tuple[str, ...] = ("agent",)  # the env's agent seats (EnvConfig fields): null harness, subprocess runtime
    flags: tuple[str, ...] = ()  # extra vf-eval flags


V1_CASES = {c.env: c for c in [
    V1Case("alphabet_sort"),
    V1Case("code_golf", roles=("golfer",)),  # two attempts per episode, compared (most_concise, fastest)
    V1Case("color_codeword"),
    V1Case("glossary"),  # a task-scoped MCP tool server per rollout (facts_lookup)
    V1Case("gsm8k"),  # its reward runs verify.py (math-verify) with `uv run --script` in the runtime
    V1Case("kuhn_poker", roles=("player0", "player1")),  # two seats, zero-sum payoff
    V1Case("proposer_solver", roles=("proposer", "solver"), flags=("--env.n", "2")),  # 1 proposer + 2 solvers
    V1Case("reverse_text"),
    V1Case("scratchpad"),  # one shared MCP tool server (scratchpad_roundtrip), per-rollout state
]}


def v1_venv() -> Path:
    """benchmarks/.venv-verifiers-0.4.0: verifiers 0.4.0 from PyPI with V1_PACKAGES; built once (about a minute),
    then cached (a stamp file). Not benchmarks/.venv-verifiers-040, whose stamp is eval_peers' own list."""
    sys.path.insert(0, str(BENCH))
    try:
        from eval_peers import ensure_venv
    finally:
        sys.path.remove(str(BENCH))
    venv = BENCH / f".venv-verifiers-{V1_VERSION}"
    ensure_venv(venv, list(V1_PACKAGES))
    return venv


# The uv scripts vf-eval 0.4.0 prepares in the subprocess runtime: the null harness's chat program and the
# PEP 723 scripts of the fixtures (gsm8k's verify.py). The runtime runs `uv sync --script` on each at every
# vf-eval start with UV_OFFLINE forced to false: without a lockfile uv resolves against the package index
# each time (gsm8k fails at task setup when the index is unreachable). A `<script>.lock` beside the copy the
# runtime keeps (content-addressed) makes later syncs install from uv's cache alone.
V1_SCRIPTS_CODE = """
import hashlib, sys
from pathlib import Path
from verifiers.v1.harnesses.utils.launch import CHAT_PROGRAM_SOURCE
from verifiers.v1.runtimes.subprocess import SubprocessRuntime
for data in [CHAT_PROGRAM_SOURCE.encode(), *(Path(p).read_bytes() for p in sys.argv[1:])]:
    path = Path(SubprocessRuntime.scripts_dir) / (hashlib.sha256(data).hexdigest() + ".py")
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_bytes() != data:
        path.write_bytes(data)
    print(path)
"""
V1_UV_SCRIPTS = {"gsm8k": ("gsm8k/verify.py",)}  # fixture files vf-eval runs with `uv run --script`


def v1_lock_scripts(venv: Path, case: V1Case) -> None:
    """Write the uv scripts `case` runs where the runtime keeps them and `uv lock --script` each that has no
    lockfile yet (needs the package index once, then uv's cache serves them)."""
    scripts = [str(FIXTURES / V1_COMMIT / case.env / rel) for rel in V1_UV_SCRIPTS.get(case.env, ())]
    done = subprocess.run([str(venv / "bin" / "python"), "-c", V1_SCRIPTS_CODE, *scripts], capture_output=True,
                          text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"could not write the uv scripts of {case.env}: {done.stderr.strip()[-500:]}")
    for script in done.stdout.split():
        if not Path(f"{script}.lock").exists():
            locked = subprocess.run([str(venv / "bin" / "uv"), "lock", "--script", script, "-q", "--no-config"],
                                    capture_output=True, text=True, timeout=600)
            if locked.returncode != 0:
                raise RuntimeError(f"uv lock --script {script} failed: {locked.stderr.strip()[-500:]}")


def v1_workdir(case: V1Case, cwd: Path) -> Path:
    """`cwd` with the unchanged a60a606 fixture as ./environments/<name>/ (the folder vf-eval imports from)."""
    target = cwd / "environments" / case.env
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(FIXTURES / V1_COMMIT / case.env, target)
    return target


def vf1_args(case: V1Case, url: str, output: Path) -> list[str]:
    seats = [arg for role in case.roles for arg in (f"--env.{role}.harness.id", "null",
                                                      f"--env.{role}.runtime.type", "subprocess")]
    return [case.env, "-m", MODEL, "--client.base-url", url, "--client.api-key-var", KEY_VAR,
            "-n", str(case.n), "-r", str(case.r), *seats, *case.flags, "--no-push", "--no-rich",
            "-o", str(output), "--run.dir", V1_RUN_DIR]


@dataclass
class V1Rollout:
    """One episode of traces.jsonl: its task, whether vf-eval says it went well, each trace's agent and reward."""
    idx: int
    ok: bool
    traces: list[tuple[str, float]]  # (agent name, reward = sum of score * weight; nan where scoring did not run)
    errors: list[str]

    @property
    def reward(self) -> float:
        """The episode's reward: its one trace's, or the mean over its traces (an env with several seats)."""
        values = [r for _, r in self.traces]
        return sum(values) / len(values) if values else float("nan")


def trace_reward(trace: dict[str, Any]) -> float:
    """verifiers' Trace.reward (a property, not saved): the sum of score * weight over the recorded rewards."""
    rewards = [r for r in (trace.get("rewards") or {}).values() if r is not None]
    if not rewards and not trace.get("ok"):
        return float("nan")
    return sum(float(r["score"]) * float(r.get("weight", 1.0)) for r in rewards)


def read_v1_rollouts(traces_file: Path) -> dict[tuple[int, int], V1Rollout]:
    """The episodes of a vf-eval 0.4.0 traces.jsonl keyed by (task idx, k): the k-th episode of that task in
    file order (completion order). Each episode's traces are sorted by agent name (completion order within an
    episode is not deterministic)."""
    seen: dict[int, int] = defaultdict(int)
    rollouts = {}
    for line in traces_file.read_text().splitlines():
        if not line.strip():
            continue
        episode = json.loads(line)
        idx = int(episode["task"]["data"]["idx"])
        traces = sorted(((t["agent"]["name"], trace_reward(t)) for t in episode.get("traces") or []),
                        key=lambda x: (x[0], x[1]))
        errors = [f"{e.get('type')}: {e.get('message')}" for e in episode.get("errors") or []]
        errors += [f"{name}: {e.get('type')}: {e.get('message')}" for t in episode.get("traces") or []
                   for name in [t["agent"]["name"]] for e in t.get("errors") or []]
        rollouts[(idx, seen[idx])] = V1Rollout(idx, bool(episode.get("ok")), traces, errors)
        seen[idx] += 1
    return rollouts


@dataclass
class V1Run(Run):
    command: list[str] = field(default_factory=list)
    rollouts: dict[tuple[int, int], V1Rollout] = field(default_factory=dict)

    @property
    def all_ok(self) -> bool:
        return bool(self.rollouts) and all(r.ok for r in self.rollouts.values())

    @property
    def errors(self) -> list[str]:
        return [f"task {k[0]} rollout {k[1]}: {e}" for k, r in sorted(self.rollouts.items()) for e in r.errors]


def v1_env(extra_path: list[Path], venv: Path) -> dict[str, str]:
    env = child_env(Case(""), extra_path)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"  # the null harness's `uv`
    return env


def vf1_eval(case: V1Case, cwd: Path, url: str, timeout: float = 600) -> V1Run:
    """Run the a60a606 fixture `case.env` under vf-eval 0.4.0 in `cwd` against the policy at `url`.
    rewards: {(task idx, k): the episode's reward} read from the traces.jsonl vf-eval wrote (an errored
    episode's reward is what vf-eval recorded, nan if nothing); rollouts: each episode in full. vf-eval 0.4.0
    exits 0 even when every rollout failed (it logs `reward=0.000 stop=TaskError`): check `all_ok`."""
    venv = v1_venv()
    v1_lock_scripts(venv, case)
    env_dir = v1_workdir(case, cwd)
    output = cwd / "outputs"
    cmd = [str(venv / "bin" / "vf-eval"), *vf1_args(case, url, output)]
    done, seconds = _run(cmd, cwd, v1_env([env_dir], venv), timeout)
    traces_file = output / V1_RUN_DIR / "traces.jsonl"
    rollouts = read_v1_rollouts(traces_file) if traces_file.exists() else {}
    rewards = {k: r.reward for k, r in rollouts.items()}
    return V1Run(done.returncode, done.stdout + done.stderr, rewards, seconds, command=cmd, rollouts=rollouts)


def compare(vf: dict[tuple[int, int], float], prime: dict[tuple[int, int], float], tol: float = 1e-6) -> list[str]:
    """The differences, one line each: keys only one side has, rewards further apart than `tol`."""
    lines = [f"example {k[0]} rollout {k[1]}: only vf-eval has it ({vf[k]})" for k in sorted(vf.keys() - prime.keys())]
    lines += [f"example {k[0]} rollout {k[1]}: only prime has it ({prime[k]})" for k in sorted(prime.keys() - vf.keys())]
    lines += [f"example {k[0]} rollout {k[1]}: vf-eval {vf[k]:.6f}, prime {prime[k]:.6f}"
              for k in sorted(vf.keys() & prime.keys()) if not abs(vf[k] - prime[k]) <= tol]
    return lines


def mean(rewards: dict[Any, float]) -> float | None:
    return sum(rewards.values()) / len(rewards) if rewards else None
