"""`make gpu-check` (scripts/gpu_check.py) off a GPU: it prints its plan and exits 0; the wheels it
unpacks are those of packages the machine lacks."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import gpu_check  # noqa: E402


def test_without_cuda_it_prints_what_it_would_run_and_exits_0():
    # the system python of CI has no torch; this one may have a CPU build: both mean no CUDA
    proc = subprocess.run(["make", "-s", "gpu-check", f"PYTHON={sys.executable}"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "No CUDA GPU here" in proc.stdout
    assert "-m gpu" in proc.stdout and proc.stdout.count("benchmarks/trainer_bench.py --model") == 5
    # the Mixture-of-Experts row (issue 41), the second bench so that the default budget reaches it
    assert "3. " + sys.executable + " benchmarks/trainer_bench.py --model qwen3-30b-a3b --shape single --seq-len 16384" in proc.stdout
    assert "qwen3-4b --shape rl" in proc.stdout and "trainer.model.attention=sdpa" in proc.stdout
    assert "trainer.model.compile=false" in proc.stdout


def test_only_the_wheels_of_missing_packages_are_unpacked(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for name, module in (("pytest-99.0-py3-none-any.whl", "pytest"),
                         ("surely_not_installed-1.0-py3-none-any.whl", "surely_not_installed")):
        with zipfile.ZipFile(wheels / name, "w") as archive:
            archive.writestr(f"{module}/__init__.py", "VERSION = 'from the wheel'\n")
    target = tmp_path / "unpacked"
    assert gpu_check.unpack_missing_wheels(wheels, target) == ["surely_not_installed 1.0"]
    assert (target / "surely_not_installed" / "__init__.py").exists()
    assert not (target / "pytest").exists()


def test_the_moe_row_is_skipped_on_a_gpu_it_cannot_fit():
    too_small = gpu_check.too_small
    assert too_small("qwen3-30b-a3b", 79.2) == "qwen3-30b-a3b: skipped, needs a GPU of 100+ GiB (this one has 79 GiB)"
    assert too_small("qwen3-30b-a3b", 139.8) is None and too_small("qwen3-0.6b", 20.0) is None
    assert too_small("qwen3-30b-a3b", None) is None
