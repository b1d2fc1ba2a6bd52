"""Every `prime` command line of the README and the guides in docs/, run as a user types it: the installed
script in a subprocess.

The workspace is what a clean clone gives (configs/ and environments/), with configs/endpoints.toml's
URLs pointed at a scripted OpenAI-compatible server on loopback and a `prime serve` record for it, so
`-m local` (the default model) finds it as it would find a running `prime serve`. Lines that start a
long-lived server, real training or need a GPU run a stand-in here (`--help`, `--dry-run`) and name the
test that runs them for real. A README line nobody classified fails `test_every_readme_line_is_covered`.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from prime_cli.serve.embedded import EMBEDDED_NAME
from prime_cli.serve.local_moe import LOCAL_MOE_NAME
from tests.cli.conftest import metadata, record_local_server, run_dirs
from tests.support.cli import REPO, run_prime
from tests.support.scripted_server import ScriptedOpenAIServer

README = REPO / "README.md"
# the README and the guides it sends users to (docs/cli.md is generated; test_cli_reference checks it)
DOCUMENTED = [README, *(REPO / "docs" / name for name in ("eval.md", "gepa.md", "training.md", "environments.md"))]
DATA_DIR = REPO / "tests" / "data"
KEYS = {"OPENAI_API_KEY": "sk-test-not-a-secret", "OPENROUTER_API_KEY": "or-test-not-a-secret"}

# README placeholders -> what a user would type in their place here
# model ids the registry (configs/endpoints.toml) and the README name, all served by the scripted server
SERVED_MODELS = ["gpt-4.1-mini", "qwen/qwen3-8b", "HuggingFaceTB/SmolLM2-135M-Instruct", "my-model", "sft"]
PLACEHOLDERS = {"MODEL": "gpt-4.1-mini", "REFLECTOR": "qwen3-8b-openrouter"}

# README lines run here through a stand-in, and where the line itself runs for real
STAND_INS = {
    # Harbor task folders of the user's own (tasks/): the fixtures' three run on podman and docker there
    "prime eval run harbor -m MODEL -a '{\"path\": \"tasks/\"}'": ("prime eval run --help", "tests/sandbox/test_harbor_tasks.py"),
    "prime eval run harbor -m MODEL --sandbox docker -a '{\"path\": \"tasks/fix-test\", \"timeout_multiplier\": 2}'":
        ("prime eval run --help", "tests/sandbox/test_harbor_tasks.py"),
    "prime serve": ("prime serve --help", "tests/integration/test_serve_cli.py"),
    "prime serve ./my-model --port 8001": ("prime serve --help", "tests/integration/test_serve_cli.py"),
    "prime serve --enable-lora --max-lora-rank 16": ("prime serve --help", "tests/integration/test_train_local.py"),
    "prime train configs/rl/reverse-text-cpu.toml":
        ("prime train configs/rl/reverse-text-cpu.toml --dry-run", "tests/integration/test_train_local.py"),
    "prime train configs/rl/reverse-text-moe-cpu.toml":
        ("prime train configs/rl/reverse-text-moe-cpu.toml --dry-run", "tests/integration/test_train_moe.py"),
    "prime serve local-moe --lora trained=outputs/rl/reverse-text-moe-cpu/weights/step_20 --port 8001":
        ("prime serve --help", "tests/integration/test_moe_lora_serve.py, tests/serve/test_local.py"),
    "prime train configs/rl/gsm8k.toml": ("prime train configs/rl/gsm8k.toml --dry-run", "needs a CUDA GPU"),
    "prime train configs/sft/reverse-text-cpu.toml":
        ("prime train configs/sft/reverse-text-cpu.toml --dry-run", "tests/integration/test_train_sft.py"),
    "prime serve --lora sft=outputs/sft/reverse-text-cpu/weights/step_40 --port 8000":
        ("prime serve --help", "tests/integration/test_train_local.py (prime serve --lora)"),
    "prime train configs/rl/reverse-text-cpu-from-sft.toml":
        ("prime train configs/rl/reverse-text-cpu-from-sft.toml --dry-run",
         "tests/integration/test_train_sft.py, plugins/prime-lora/tests/test_trainer_warm_start.py"),
    "prime train configs/rl/reverse-text-cpu-distill.toml":
        ("prime train configs/rl/reverse-text-cpu-distill.toml --dry-run", "tests/integration/test_train_teacher.py"),
    "prime env install my-env": (None, "test_env_install_then_eval below (installs, then uninstalls)"),
    # the lines of "Share an environment" need a package index: they run against pypiserver there
    **{line: ("prime env push --help", "tests/workspace/test_env_push.py") for line in (
        "prime env push -p environments/my_env", "prime env push -p environments/my_env --visibility private",
        "prime env push -p environments/my_env -r team", "prime env push -p environments/my_env -r https://host/ --dry-run")},
    **{line: ("prime env install --help", "tests/workspace/test_env_install_index.py, tests/workspace/test_env_push.py")
       for line in ("prime env install team/my-env", "prime env install team/my-env==1.2.0")},
    # no network here: the same LiteLLM route with provider openai, whose base URL litellm reads from
    # OPENAI_BASE_URL (set to the scripted server for this line); a missing key is tested in test_model_names
    "prime eval run reverse-text -m anthropic/claude-sonnet-4":
        ("prime eval run reverse-text -m openai/gpt-4.1-mini -n 2 -r 1", "tests/cli/test_model_names.py"),
}
LITELLM_BASE_URL_VAR = "OPENAI_BASE_URL"


def readme_command_lines() -> list[str]:
    """`prime ...` lines of the documents' fenced code blocks, without their trailing comments, each once."""
    lines, in_block = [], False
    for line in "\n".join(doc.read_text(encoding="utf-8") for doc in DOCUMENTED).splitlines():
        if line.startswith("```"):
            in_block = not in_block
            continue
        if in_block and line.startswith("prime "):
            command = re.split(r"\s+#\s", line, maxsplit=1)[0].strip()
            lines.append(" ".join(command.split()))
    return list(dict.fromkeys(lines))


SUBCOMMANDS = {"eval": {"run", "view", "tui", "export"}, "gepa": {"run"}, "env": {"init", "install", "list", "info", "check", "push"},
               "lab": {"setup"}, "serve": set(), "train": set(), "sandbox": {"list", "prune", "image"}}
# subcommands run through the real script by other tests of this folder
RUN_ELSEWHERE = {"prime eval tui": "tests/cli/test_tui_command.py (a pseudo-terminal)",
                 "prime eval view": "tests/cli/test_tui_command.py (a pseudo-terminal)",
                 "prime env install": "test_env_install_then_eval below",
                 "prime --help": "tests/test_cli.py, tests/test_import_hygiene.py",
                 "prime --version": "tests/test_cli.py",
                 "prime sandbox list": "tests/sandbox/test_inventory.py (real podman and docker containers)",
                 "prime sandbox prune": "tests/sandbox/test_inventory.py (real podman and docker containers)",
                 "prime sandbox image": "tests/sandbox/test_inventory.py (an image already imported)"}


def subcommand(line: str) -> str:
    words = line.split()
    group = words[1] if len(words) > 1 else ""
    sub = SUBCOMMANDS.get(group, set())
    return " ".join(words[:3]) if len(words) > 2 and words[2] in sub else " ".join(words[:2])


def readme_subcommands() -> set[str]:
    """Every `prime X [Y]` the documents name, in code blocks or inline."""
    text = "\n".join(doc.read_text(encoding="utf-8") for doc in DOCUMENTED)
    inline = re.findall(r"`(prime [^`]+)`", text)
    return {subcommand(line) for line in [*inline, *readme_command_lines()]}


def substitute(line: str, url: str) -> str:
    for placeholder, value in PLACEHOLDERS.items():
        line = re.sub(rf"\b{placeholder}\b", value, line)
    return line.replace("http://localhost:8000/v1", url)


# `RUN` in a README line is a saved eval run folder: the workspace's newest, made here when it has none;
# `A B` of `prime eval compare A B` are its two newest (two made when it has fewer)
RUN_PLACEHOLDER = "RUN"
MAKE_A_RUN = "prime eval run reverse-text -m gpt-4.1-mini -n 2 -r 2 -s"


def with_saved_run(command: str, cwd: Path, cache: Path) -> str:
    words = shlex.split(command)
    pair = words[1:3] == ["eval", "compare"]
    wanted = 2 if pair else 1
    if RUN_PLACEHOLDER not in words and not pair:
        return command
    def saved() -> list[Path]:  # of one environment: MAKE_A_RUN's, when a pair is needed
        return sorted((d for d in run_dirs(cwd) if "evals" in d.parts
                       and (not pair or d.parent.name.startswith("reverse-text--"))), key=lambda d: d.name)

    while len(saved()) < wanted:
        made = run_line(MAKE_A_RUN, cwd, cache)
        assert made.returncode == 0, made.stderr[-3000:]
    runs = saved()
    places = {"A": str(runs[-2]), "B": str(runs[-1])} if pair else {RUN_PLACEHOLDER: str(runs[-1])}
    return shlex.join([places.get(word, word) for word in words])


# `--weights-dir DIR` in a README line is a training run's weights folder: hand-made adapters of the
# steps the line names (--steps), else two; the scripted server plays vLLM with runtime LoRA loading
SWEEP_STEPS = ["0", "5"]


def with_weights(command: str, cwd: Path) -> None:
    words = shlex.split(command)
    if "--weights-dir" not in words:
        return
    folder = cwd / words[words.index("--weights-dir") + 1]
    steps = words[words.index("--steps") + 1].split(",") if "--steps" in words else SWEEP_STEPS
    for step in steps:
        adapter = folder / f"step_{step}"
        adapter.mkdir(parents=True, exist_ok=True)
        (adapter / "adapter_config.json").write_text('{"r": 8, "peft_type": "LORA"}')
        (adapter / "adapter_model.safetensors").write_bytes(b"not read by the scripted server")


def sweep_runs(args: list[str]) -> int:
    """Runs a checkpoint sweep line saves: one per step, plus the base model's."""
    steps = len(args[args.index("--steps") + 1].split(",")) if "--steps" in args else len(SWEEP_STEPS)
    return steps + (0 if "--no-eval-base" in args else 1)


@pytest.fixture(scope="module")
def server():
    with ScriptedOpenAIServer(models=[EMBEDDED_NAME, LOCAL_MOE_NAME, *SERVED_MODELS]) as scripted:
        yield scripted


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, server) -> Path:
    root = tmp_path_factory.mktemp("clone")
    shutil.copytree(REPO / "configs", root / "configs")
    shutil.copytree(REPO / "environments", root / "environments",
                    ignore=shutil.ignore_patterns("outputs", "__pycache__", "*.egg-info"))
    registry = root / "configs" / "endpoints.toml"
    registry.write_text(re.sub(r'url = "[^"]*"', f'url = "{server.url}"', registry.read_text()))
    return root


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory, server) -> Path:
    cache = tmp_path_factory.mktemp("cache")
    # a `prime serve --enable-lora`, taken for the embedded model and for local-moe (whose lines run here too)
    record_local_server(cache, server, lora=True, max_lora_rank=16, models=[EMBEDDED_NAME, LOCAL_MOE_NAME])
    return cache


def run_line(line: str, cwd: Path, cache: Path, timeout: float = 300,
             extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    args = shlex.split(line)
    assert args[0] == "prime"
    env = {**KEYS, "PRIME_CACHE_DIR": str(cache), "PRIME_DATA_DIR": str(DATA_DIR), **(extra_env or {})}
    return run_prime(args[1:], cwd, env, timeout=timeout)


def test_every_readme_line_is_covered():
    lines = readme_command_lines()
    assert len(lines) >= 15, lines  # the parser still finds the README's commands
    assert set(STAND_INS) <= set(lines), f"stale entries: {set(STAND_INS) - set(lines)}"
    run_here = {subcommand(STAND_INS.get(line, (line,))[0] or line) for line in lines}
    missing = readme_subcommands() - run_here - set(RUN_ELSEWHERE)
    assert not missing, f"README commands no test runs: {missing}"
    assert {"prime eval run", "prime gepa run", "prime train", "prime lab setup"} <= run_here


def new_runs(root: Path, before: list[Path]) -> list[Path]:
    return [d for d in run_dirs(root) if d not in before]


@pytest.mark.parametrize("line", [line for line in readme_command_lines() if STAND_INS.get(line, ("",))[0] is not None])
def test_readme_line_runs(line, workspace, server, cache_dir):
    command = STAND_INS[line][0] if line in STAND_INS else substitute(line, server.url)
    cwd = workspace
    if command.startswith("prime lab setup"):
        cwd = workspace.parent / f"lab-{uuid.uuid4().hex[:6]}"
        cwd.mkdir()
    if command.startswith("prime env init"):
        cwd = workspace.parent / f"init-{uuid.uuid4().hex[:6]}"
        cwd.mkdir()
    extra_env = {LITELLM_BASE_URL_VAR: server.url} if "-m openai/" in command else None
    command = with_saved_run(command, cwd, cache_dir)
    with_weights(command, cwd)
    before = run_dirs(workspace)
    result = run_line(command, cwd, cache_dir, extra_env=extra_env)
    assert result.returncode == 0, f"{command}\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    assert "Traceback" not in result.stderr
    check_effect(command, cwd, before, result)


def check_effect(command: str, cwd: Path, before: list[Path], result: subprocess.CompletedProcess) -> None:
    """What the line must have done, beyond exiting 0."""
    args = shlex.split(command)[1:]
    out = result.stdout
    if args == ["eval", "run", "--help"]:  # the stand-in of a Harbor line: the flags it uses are there
        assert "--sandbox" in out and "--env-args" in out, out
    elif args[:2] == ["eval", "run"]:
        made = new_runs(cwd, before)
        expected = 2 if args[2].endswith(".toml") else (1 if "-s" in args else 0)
        if "--weights-dir" in args:
            expected = sweep_runs(args)
            assert "<- best" in out or "<- highest mean" in out, out
        assert len(made) == expected, (made, out)
        for run_dir in made:
            meta = metadata(run_dir)
            assert meta["status"] == "completed" and meta["avg_reward"] is not None
        assert "Reward:" in out or "avg_reward" in out
    elif args[:2] == ["eval", "export"]:
        rows = (Path(args[2]) / "results.jsonl").read_text().splitlines()
        written = Path(out.strip().rsplit(" to ", 1)[-1])
        assert written.is_file() and f"exported {len(rows)} rows" in out, out
        if written.suffix == ".parquet":
            import pandas as pd

            assert len(pd.read_parquet(written)) == len(rows)
    elif args[:2] == ["eval", "compare"]:
        if "--json" in args:
            assert json.loads(out)["reward"]["examples"] >= 1, out
        else:
            assert out.startswith("A: ") and "reward: " in out and "paired examples" in out, out
            # the documented runs may agree on every example: then the power line says it cannot be estimated
            assert ("to detect a difference of 0.05 at 80% power: " in out) == ("--power" in args), out
    elif args[:2] == ["eval", "rescore"]:
        made = new_runs(cwd, before)
        assert len(made) == 1 and metadata(made[0])["rescored_from"]["run"] == str(Path(args[2]).resolve()), made
        assert "Rescored (B) against the saved rewards (A):" in out and "reward: " in out, out
    elif args[:2] == ["gepa", "run"]:
        made = [d for d in new_runs(cwd, before) if "gepa" in d.parts]
        assert len(made) == 1, made
        for name in ("best_prompt.txt", "pareto_frontier.jsonl", "metadata.json"):
            assert (made[0] / name).is_file(), name
        assert "Best system prompt" in out
    elif args[0] == "train" and "--list" in args:
        assert "prime-lora" in out
    elif args[0] == "train":
        assert "dry run" in out.lower() or "plan" in out.lower(), out
    elif args[:2] == ["lab", "setup"]:
        assert (cwd / "configs" / "endpoints.toml").is_file() and (cwd / "environments").is_dir()
    elif args[:2] == ["env", "init"]:
        assert (cwd / "environments" / "my_env" / "pyproject.toml").is_file()
    elif args[:2] == ["env", "list"]:
        assert "reverse-text" in out or "reverse_text" in out
    elif args[:2] == ["env", "info"]:
        assert "reward" in out.lower() and args[2] in out
    elif args[:2] == ["env", "check"]:
        assert "reference" in out and out.rstrip().splitlines()[-1].startswith("ok:"), out
    elif args[0] == "serve":
        assert "--port" in out
    elif args[:2] == ["env", "push"] or args[:2] == ["env", "install"]:  # stand-ins: --help
        assert args[-1] == "--help" and f"prime env {args[1]}" in out and "index" in out, out
    else:
        raise AssertionError(f"no effect check for {command}; add one")


def test_env_install_then_eval(tmp_path, server, cache_dir):
    """`prime env init my-env` then `prime env install my-env` (README), then an eval from elsewhere."""
    name = f"my-env-{uuid.uuid4().hex[:8]}"  # unique: the install goes into the running venv
    try:
        assert run_line(f"prime env init {name}", tmp_path, cache_dir).returncode == 0
        installed = run_line(f"prime env install {name}", tmp_path, cache_dir)
        assert installed.returncode == 0, installed.stderr
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        listed = run_line("prime env list", elsewhere, cache_dir)
        assert name in listed.stdout
    finally:
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", "-q", name], capture_output=True)
