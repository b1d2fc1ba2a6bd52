"""`make gpu-check`: everything that needs a CUDA GPU, in one command and one table.

    python3 scripts/gpu_check.py [--budget 450] [--wheels .gpu-wheels] [--json out.json] [--plan]

Meant for a lent GPU machine with torch but no virtualenv and no network: the project runs from its
folder (PYTHONPATH), and what the machine lacks is taken from the wheels in --wheels (`make gpu-wheels`
downloads them here, for Python 3.12; they are unpacked into a temporary folder, never installed).
It runs the GPU-marked tests, then the trainer benchmark (benchmarks/trainer_bench.py) on the shapes
of Qwen3-0.6B and Qwen3-4B, one 16k-token sequence and an RL-shaped batch, with compiled layers on and
off and each attention on packed rows, and on Qwen3-30B-A3B (Mixture-of-Experts, LoRA r16 on attention
and every expert, built in memory on the GPU: about 72 GiB of weights and LoRA state before activations,
so a 141 GB H200; an 80 GB H100 runs out of memory) one 16k-token sequence, second so that it runs
within the budget, and prints one table beside prime-rl's published figures.
Each part gets what is left of --budget seconds; a part that would start with too little is skipped
and said so. Without CUDA it prints what it would run and exits 0.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks" / "trainer_bench.py"
# import name -> distribution name, for what the GPU path may need
PACKAGES = {"torch": "torch", "transformers": "transformers", "peft": "peft", "accelerate": "accelerate",
            "safetensors": "safetensors", "triton": "triton", "pytest": "pytest", "jinja2": "jinja2",
            "pydantic": "pydantic", "openai": "openai", "httpx": "httpx", "rich": "rich", "typer": "typer",
            "wandb": "wandb", "vllm": "vllm"}
TESTS = ["-m", "pytest", "-q", "-rs", "-m", "gpu", "-p", "no:cacheprovider", "--continue-on-collection-errors",
         "-o", "addopts=", "plugins/prime-lora/tests"]
RL = ["--shape", "rl", "--seq-len", "16384", "--samples", "16", "--min-len", "256", "--max-len", "4096",
      "--prompt-len", "200", "--no-unpacked", "--variant", "sdpa:trainer.model.attention=sdpa"]
SINGLE = ["--shape", "single", "--seq-len", "16384", "--variant", "eager:trainer.model.compile=false"]
BENCHES = [  # (model, shape arguments, timed steps, with the transformers + peft peer)
    ("qwen3-0.6b", SINGLE, 3, True),
    ("qwen3-30b-a3b", SINGLE, 2, False),
    ("qwen3-0.6b", RL, 2, False),
    ("qwen3-4b", SINGLE, 2, False),
    ("qwen3-4b", RL, 2, False),
]
PRIME_RL = {"qwen3-0.6b": "13.3k tok/s, 5.1 GiB", "qwen3-4b": "6.2k tok/s, 23.3 GiB",  # one 16k seq, H100, FA3
            "qwen3-30b-a3b": "4.1k tok/s per GPU (33.1k on 8 H100s)"}
MIN_SECONDS = {"tests": 60, "bench": 45}  # a part that would start with less than this is skipped
# GPU memory a bench model needs: 30B-A3B holds ~72 GiB of bf16 weights and fp32 LoRA + AdamW state before
# activations (docs/training.md, MoE models), so an 80 GB card would only run out of memory
MIN_GPU_GIB = {"qwen3-30b-a3b": 100}


def too_small(model: str, gpu_gib: float | None) -> str | None:
    """Why a bench is skipped on this GPU (None: it fits, or the memory is unknown)."""
    need = MIN_GPU_GIB.get(model)
    if need is None or gpu_gib is None or gpu_gib >= need:
        return None
    return f"{model}: skipped, needs a GPU of {need}+ GiB (this one has {gpu_gib:.0f} GiB)"


@dataclass
class Check:
    budget: float
    wheels: Path | None
    started: float = field(default_factory=time.monotonic)
    rows: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def left(self) -> float:
        return self.budget - (time.monotonic() - self.started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=450.0, help="seconds for everything (default 450)")
    parser.add_argument("--wheels", type=Path, default=ROOT / ".gpu-wheels",
                        help="wheels of packages the machine lacks (make gpu-wheels)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--plan", action="store_true", help="print what would run and exit")
    args = parser.parse_args()
    if args.plan or not has_cuda():
        print("No CUDA GPU here (or torch is missing): nothing is run. On a GPU machine this runs:"
              if not args.plan else "gpu-check runs:")
        print_plan()
        return 0
    check = Check(args.budget, args.wheels if args.wheels.is_dir() else None)
    env = project_env(check)
    environment = describe_machine(env)
    print(environment["line"], flush=True)
    print(environment["packages"], flush=True)
    tests = run_tests(check, env)
    for model, shape, steps, peer in BENCHES:
        if reason := too_small(model, environment.get("memory_gib")):
            check.notes.append(reason)
            continue
        run_bench(check, env, model, shape, steps, peer)
    print_report(environment, tests, check)
    if args.json:
        args.json.write_text(json.dumps({"machine": environment, "tests": tests, "bench": check.rows,
                                         "notes": check.notes, "seconds": round(time.monotonic() - check.started)},
                                        indent=2))
    return 1 if tests["failed"] or tests["errors"] else 0


def has_cuda() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    probe = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available())"],
                           capture_output=True, text=True)
    return probe.stdout.strip() == "True"


def print_plan() -> None:
    print(f"  1. the GPU-marked tests: {sys.executable} {shlex.join(TESTS)}")
    for number, (model, shape, steps, peer) in enumerate(BENCHES, 2):
        print(f"  {number}. {sys.executable} benchmarks/trainer_bench.py {shlex.join(bench_args(model, shape, steps, peer))}")
    print("  within --budget seconds (default 450), then one table beside prime-rl's published figures;")
    print(f"  missing packages come from wheels in --wheels (make gpu-wheels; default {ROOT / '.gpu-wheels'})")


def bench_args(model: str, shape: list[str], steps: int, peer: bool) -> list[str]:
    # the first bench (with the peer) also times the SFT step against the RL step; the others skip both
    return ["--model", model, *shape, "--steps", str(steps), *([] if peer else ["--no-peer", "--no-sft"])]


def project_env(check: Check) -> dict[str, str]:
    """PYTHONPATH: the project, its plugin, and the unpacked wheels of the packages the machine lacks."""
    paths = [str(ROOT), str(ROOT / "plugins" / "prime-lora")]
    if check.wheels is not None:
        target = Path(tempfile.mkdtemp(prefix="prime-gpu-wheels-"))
        taken = unpack_missing_wheels(check.wheels, target)
        if taken:
            paths.append(str(target))
            check.notes.append(f"from {check.wheels.name}/: {', '.join(taken)}")
    inherited = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths + ([inherited] if inherited else [])),
            "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_DISABLE_PROGRESS_BARS": "1",
            "TRANSFORMERS_VERBOSITY": "error", "HF_HUB_OFFLINE": "1"}


def unpack_missing_wheels(folder: Path, target: Path) -> list[str]:
    """Unpack each wheel whose distribution is not installed (a wheel is a zip of its import folders)."""
    taken = []
    for wheel in sorted(folder.glob("*.whl")):
        name, version = wheel.name.split("-")[:2]
        try:
            importlib.metadata.version(name.replace("_", "-"))
            continue
        except importlib.metadata.PackageNotFoundError:
            pass
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(target)
        taken.append(f"{name} {version}")
    return taken


def describe_machine(env: dict[str, str]) -> dict:
    probe = ("import json, importlib.util, importlib.metadata as m, torch\n"
             f"names = {PACKAGES!r}\n"
             "found = {}\n"
             "for module, dist in names.items():\n"
             "    if importlib.util.find_spec(module) is None: found[module] = None; continue\n"
             "    try: found[module] = m.version(dist)\n"
             "    except m.PackageNotFoundError: found[module] = '?'\n"
             "print(json.dumps({'gpu': torch.cuda.get_device_name(), 'count': torch.cuda.device_count(),\n"
             "  'memory_gib': torch.cuda.get_device_properties(0).total_memory / 2**30,\n"
             "  'torch': torch.__version__, 'cuda': torch.version.cuda, 'python': '%d.%d' % __import__('sys').version_info[:2],\n"
             "  'packages': found}))")
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    machine = json.loads(out.stdout)
    found = {k: v for k, v in machine["packages"].items() if v}
    missing = sorted(k for k, v in machine["packages"].items() if not v)
    machine["line"] = (f"gpu-check on {machine['count']}x {machine['gpu']}: Python {machine['python']}, "
                       f"torch {machine['torch']} (CUDA {machine['cuda']})")
    machine["packages"] = ("  found (on the machine or from --wheels, see the note below): "
                           + ", ".join(f"{k} {v}" for k, v in found.items())
                           + "\n  missing (tests that need them skip): " + (", ".join(missing) or "nothing"))
    machine["missing"] = missing
    return machine


def run_tests(check: Check, env: dict[str, str]) -> dict:
    result = {"passed": 0, "failed": 0, "skipped": 0, "errors": 0, "skip_reasons": [], "failures": []}
    if check.left() < MIN_SECONDS["tests"]:
        check.notes.append("GPU tests skipped: out of budget")
        return result
    print(f"\n$ python {shlex.join(TESTS)}", flush=True)
    out, code = run(["-u", *TESTS], env, timeout=min(check.left() * 0.45, 240))
    print(out[-6000:], flush=True)
    for kind in ("passed", "failed", "skipped", "errors", "error"):
        found = re.findall(rf"(\d+) {kind}\b", out)
        if found:
            result["errors" if kind == "error" else kind] += int(found[-1])
    result["skip_reasons"] = sorted(set(re.findall(r"^SKIPPED \[\d+\] (.*)$", out, re.M)))
    result["failures"] = re.findall(r"^(?:FAILED|ERROR) (.*)$", out, re.M)
    if code == "timeout":
        result["errors"] += 1
        result["failures"].append("the GPU tests ran past their share of the budget")
    return result


def run_bench(check: Check, env: dict[str, str], model: str, shape: list[str], steps: int, peer: bool) -> None:
    label = f"{model} {shape[1]}"
    if check.left() < MIN_SECONDS["bench"]:
        check.notes.append(f"{label}: skipped, out of budget")
        return
    cache = Path(tempfile.gettempdir()) / "prime-gpu-check-models"
    with tempfile.NamedTemporaryFile(suffix=".json") as report:
        command = [str(BENCH), *bench_args(model, shape, steps, peer), "--model-dir", str(cache),
                   "--json", report.name]
        print(f"\n$ python {shlex.join(command)}", flush=True)
        out, code = run(command, env, timeout=check.left())
        print(out[-2500:], flush=True)
        if code != 0:
            check.notes.append(f"{label}: {'timed out' if code == 'timeout' else f'failed (exit {code})'}")
            return
        data = json.loads(Path(report.name).read_text())
    for variant in data["variants"]:
        check.rows.append({"model": model, "shape": shape[1], "variant": variant["variant"],
                           "tokens_per_s": variant["tokens_per_s"], "step_s": variant["step_s"],
                           "mfu": variant.get("mfu"), "peak_gib": variant.get("peak_memory_gib")})


def run(arguments: list[str], env: dict[str, str], timeout: float) -> tuple[str, int | str]:
    try:
        proc = subprocess.run([sys.executable, *arguments], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=max(timeout, 1))
    except subprocess.TimeoutExpired as stopped:
        text = (stopped.stdout or b"") + (stopped.stderr or b"")
        return (text.decode(errors="replace") if isinstance(text, bytes) else text), "timeout"
    return proc.stdout + proc.stderr, proc.returncode


def print_report(machine: dict, tests: dict, check: Check) -> None:
    seconds = time.monotonic() - check.started
    print("\n" + "=" * 100)
    print(f"{machine['line']}; {seconds:.0f} s")
    print(machine["packages"])
    print(f"GPU tests: {tests['passed']} passed, {tests['failed']} failed, {tests['errors']} errors, "
          f"{tests['skipped']} skipped")
    for reason in tests["skip_reasons"]:
        print(f"  skipped: {reason}")
    for failure in tests["failures"]:
        print(f"  FAILED: {failure}")
    print(f"\n{'model':<13} {'shape':<7} {'variant':<28} {'tok/s':>8} {'s/step':>7} {'MFU':>6} {'peak GiB':>9}  "
          "prime-rl (published, one 16k seq, H100)")
    for row in check.rows:
        mfu = f"{row['mfu'] * 100:.1f}%" if row["mfu"] is not None else "-"
        peak = f"{row['peak_gib']:.1f}" if row["peak_gib"] is not None else "-"
        reference = PRIME_RL.get(row["model"], "") if row["shape"] == "single" else ""
        print(f"{row['model']:<13} {row['shape']:<7} {row['variant']:<28} {row['tokens_per_s']:>8,.0f} "
              f"{row['step_s']:>7.2f} {mfu:>6} {peak:>9}  {reference}")
    for note in check.notes:
        print(f"  note: {note}")


if __name__ == "__main__":
    sys.exit(main())
