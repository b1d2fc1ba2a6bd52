"""`prime train` on a machine with fewer GPUs than the config names: a real run (not only --dry-run)
refuses with one line and exit 2 before anything starts. The machine is steered without a GPU or torch:
an `nvidia-smi` on PATH is what has_cuda looks for, and CUDA_VISIBLE_DEVICES=0 makes the GPU count 1."""

from __future__ import annotations

import os

import pytest

from tests.train.support import MINIMAL, assert_one_error_line, run_train, write


def one_gpu_machine(tmp_path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\nexit 0\n")
    smi.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "CUDA_VISIBLE_DEVICES": "0"}


@pytest.mark.parametrize(("ids", "highest"), [("trainer_gpu_ids = [1]", 1), ("inference_gpu_ids = [0, 3]", 3)],
                         ids=["trainer", "inference"])
def test_a_real_run_naming_a_missing_gpu_is_refused_before_anything_starts(tmp_path, ids, highest):
    config = write(tmp_path, f"{ids}\n{MINIMAL}")
    out = tmp_path / "run"
    result = run_train([str(config), "-o", str(out)], extra_env=one_gpu_machine(tmp_path))
    assert_one_error_line(result, f"the config uses GPU {highest} but this machine shows 1 GPU (ids 0..0)")
    assert not out.exists()  # no output folder, so no launcher, lock or part was started


def test_the_dry_run_only_notes_the_missing_gpu(tmp_path):
    config = write(tmp_path, f"trainer_gpu_ids = [1]\n{MINIMAL}")
    result = run_train([str(config), "--dry-run", "-o", str(tmp_path / "run")], extra_env=one_gpu_machine(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "the config uses GPU 1 but this machine shows 1 GPU" in result.stdout
