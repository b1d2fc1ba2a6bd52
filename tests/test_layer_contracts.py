"""The import-linter contracts of pyproject.toml ([tool.importlinter]) hold, and they catch a broken layer.

The first test runs `lint-imports` on the repository as `make test` does; the second runs it on a copy
of the packages with one forbidden import added per contract, so a contract that checks nothing fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import prime_cli
import prime_lora

REPO = Path(__file__).resolve().parents[1]
LINT = [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; "
        "sys.exit(lint_imports_command())"]


def lint_imports(cwd: Path, config: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run([*LINT, "--config", str(config), "--no-cache", "--no-logo"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_lint_imports_passes_on_the_repository():
    result = lint_imports(REPO, REPO / "pyproject.toml")
    assert result.returncode == 0, (
        "a layer contract of pyproject.toml [tool.importlinter] is broken (fix the import, or move what "
        f"both sides need into a lower layer; see DESIGN.md 'Layers'):\n{result.stdout}{result.stderr}")
    assert "Contracts: 5 kept, 0 broken." in result.stdout


VIOLATIONS = {
    # contract id: (file in the copy, the forbidden import added to it)
    "layers": ("prime_cli/gepa/engine.py", "import prime_cli.evals.store"),
    "tui-readers": ("prime_cli/tui/app.py", "import prime_cli.evals.runner"),
    "tui-run-files": ("prime_cli/tui/locate.py", "import prime_cli.runs.layouts"),
    "engine-run-lines": ("prime_cli/evals/runner.py", "import prime_cli.runs.json_lines"),
    "plugin-api": ("prime_lora/plugin.py", "import prime_cli.train.config"),
}


def test_each_contract_reports_a_forbidden_import(tmp_path):
    for package in (prime_cli, prime_lora):
        source = Path(package.__file__).parent
        shutil.copytree(source, tmp_path / source.name, ignore=shutil.ignore_patterns("__pycache__"))
    for path, line in VIOLATIONS.values():
        with (tmp_path / path).open("a", encoding="utf-8") as fh:
            fh.write(f"\n{line}  # noqa\n")
    result = lint_imports(tmp_path, REPO / "pyproject.toml", pythonpath=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Contracts: 0 kept, 5 broken." in result.stdout, result.stdout
    for path, line in VIOLATIONS.values():
        importer = path.removesuffix(".py").replace("/", ".")
        assert f"{importer} -> {line.split()[1]}" in result.stdout, result.stdout
