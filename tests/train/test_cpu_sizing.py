"""A GPU-sized config on a machine without CUDA: `prime lab setup` writes the CPU config beside the GPU ones and
their comments say which is which; `prime train --dry-run` (and a real run's first lines) warn when a config
would run on the CPU for hours."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from tests.evals.cli_support import REPO, run_prime
from tests.train.support import run_train, write
from tests.train.test_gpu_shortage_cli import one_gpu_machine

NO_CUDA = not Path("/proc/driver/nvidia").exists()
needs_no_cuda = pytest.mark.skipif(not NO_CUDA, reason="this machine has a CUDA driver")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("lab")
    assert run_prime(["lab", "setup"], root).returncode == 0
    return root


def test_lab_setup_writes_the_cpu_config(workspace):
    written = (workspace / "configs" / "rl" / "reverse-text-cpu.toml").read_text()
    assert written == (REPO / "configs" / "rl" / "reverse-text-cpu.toml").read_text()


def test_the_gpu_configs_say_they_are_sized_for_a_gpu(workspace):
    for shape in ("rl", "prime-rl"):
        text = (workspace / "configs" / shape / "reverse-text.toml").read_text()
        header = "".join(line for line in text.splitlines(keepends=True) if line.startswith("#"))
        assert "sized for a GPU" in header and "takes hours on a CPU" in header, header
        assert "configs/rl/reverse-text-cpu.toml" in header, header
        tomllib.loads(text)


def test_prime_rl_setup_points_to_its_own_cpu_config(tmp_path):
    assert run_prime(["lab", "setup", "--prime-rl"], tmp_path).returncode == 0
    cpu = tmp_path / "configs" / "prime-rl" / "reverse-text-cpu.toml"
    assert cpu.read_text().startswith("# prime train configs/prime-rl/reverse-text-cpu.toml\n")
    text = (tmp_path / "configs" / "prime-rl" / "reverse-text.toml").read_text()
    assert "configs/prime-rl/reverse-text-cpu.toml" in text and "configs/rl/" not in text


@needs_no_cuda
def test_the_dry_run_warns_that_the_gpu_config_takes_hours_on_this_cpu(workspace):
    result = run_train(["configs/rl/reverse-text.toml", "--dry-run"], cwd=workspace)
    assert result.returncode == 0, result.stderr
    warnings = [line.strip() for line in result.stdout.splitlines() if "sized for a GPU" in line]
    assert len(warnings) == 1, result.stdout
    assert warnings[0].startswith("warning: this config is sized for a GPU and this machine has no CUDA")
    assert "100 steps x 64 rollouts x up to 512 tokens" in warnings[0]
    assert "configs/rl/reverse-text-cpu.toml" in warnings[0] and "hours" in warnings[0]


@needs_no_cuda
def test_the_cpu_config_gets_no_warning(workspace):
    result = run_train(["configs/rl/reverse-text-cpu.toml", "--dry-run"], cwd=workspace)
    assert result.returncode == 0, result.stderr
    assert "sized for a GPU" not in result.stdout


def test_no_warning_with_a_gpu(workspace, tmp_path):
    result = run_train(["configs/rl/reverse-text.toml", "--dry-run"], cwd=workspace, extra_env=one_gpu_machine(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "sized for a GPU" not in result.stdout


@needs_no_cuda
def test_a_multi_gpu_config_gets_only_the_plans_cpu_note(tmp_path):
    """A config for 8 GPUs is meant for another machine: the plan's note says it would run on the CPU here."""
    config = write(tmp_path, 'model = "local"\nnum_gpus = 8\ntensor_parallel_size = 4\nmax_steps = 1000\n'
                             'batch_size = 512\nrollouts_per_example = 16\n[[env]]\nid = "reverse-text"\n')
    result = run_train([str(config), "--dry-run"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "this machine has no CUDA GPU, so here it would run on CPU" in result.stdout
    assert "sized for a GPU" not in result.stdout
