"""Heavy libraries stay out of light entry points (checked in a fresh interpreter)."""

import subprocess
import sys

import pytest

from tests.support.cli import run_prime

HEAVY = ["openai", "litellm", "textual", "torch", "vllm", "transformers", "pandas", "wandb"]


def imported_after(code: str) -> set[str]:
    probe = f"import sys\n{code}\nprint('HEAVY:' + ','.join(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    last = out.stdout.strip().splitlines()[-1]
    assert last.startswith("HEAVY:"), out.stdout
    return set(filter(None, last.removeprefix("HEAVY:").split(",")))


def test_envs_api_imports_no_heavy_library():
    assert imported_after("import prime_cli.envs as vf; vf.SingleTurnEnv(dataset=[{'question': 'q'}]).get_dataset()") == set()


def test_prime_help_imports_no_heavy_library():
    code = "from prime_cli.cli.main import app\ntry:\n    app(['--help'])\nexcept SystemExit:\n    pass"
    assert imported_after(code) == set()


def test_prime_train_help_imports_no_heavy_library():
    code = ("from prime_cli.cli.main import app\ntry:\n    app(['train', '--help'])\nexcept SystemExit:\n    pass\n"
            "light = [m for m in ('prime_cli.train.config', 'prime_cli.train.loading', 'prime_cli.envs', "
            "'prime_lora', 'peft') if m in sys.modules]\nprint('LIGHT:' + ','.join(light))")
    assert imported_after(code) == set()
    out = subprocess.run([sys.executable, "-c", "import sys\n" + code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "LIGHT:"


def test_train_core_imports_no_torch():
    code = "import prime_cli.train.loading, prime_cli.train.plan, prime_cli.train.plugins, prime_cli.train.config"
    assert imported_after(code) == set()


# Every `--help` and `--version` stays a light process: typer 0.29+ coerces parameters through pydantic
# TypeAdapters built at parse time (~0.2 s per command), so the supported typer range stops below it.
HELP_COMMANDS = [
    ["--help"], ["--version"], ["eval", "--help"], ["eval", "run", "--help"], ["eval", "tui", "--help"], ["eval", "view", "--help"],
    ["eval", "export", "--help"], ["gepa", "run", "--help"], ["env", "list", "--help"], ["env", "info", "--help"],
    ["lab", "setup", "--help"], ["serve", "--help"], ["train", "--help"],
]
NOT_AT_HELP_TIME = sorted({*HEAVY, "pydantic", "rich"})


def modules_imported_by_prime(args: list[str], cwd) -> set[str]:
    """Top-level packages the installed `prime ARGS` imports (Python's own -X importtime log)."""
    result = run_prime(args, cwd=cwd, extra_env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if line.startswith("import time:")]
    assert lines, "no import log on stderr"
    return {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in lines}


@pytest.mark.parametrize("args", HELP_COMMANDS, ids=" ".join)
def test_help_and_version_import_neither_pydantic_nor_rich(args, tmp_path):
    imported = modules_imported_by_prime(args, tmp_path)
    assert "typer" in imported
    assert sorted(imported & set(NOT_AT_HELP_TIME)) == []


def test_load_run_imports_pandas_only_for_to_pandas():
    assert imported_after("from prime_cli.evals import load_run\nimport prime_cli.evals.export") == set()
