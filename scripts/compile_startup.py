"""Byte-compile what prime's everyday commands import, once, at setup.

pip installs with --no-compile (byte-compiling vLLM and torch takes minutes), and where bytecode is not
written (PYTHONDONTWRITEBYTECODE, as in many sandboxes and CI images) every `prime eval run` would then
recompile pydantic, openai, rich and the environment's own libraries from source: about half a second of
a 200x4 eval's wall time (measured with benchmarks/eval_throughput.py). This imports what `prime --help`,
`prime eval run`, `prime gepa run` and `prime eval tui` import, loads every example environment and its first row, and
compiles each installed package any of that touched (whole packages: a package's other modules are often
imported later, during a run) plus prime_cli itself. vLLM and torch are left alone (`prime train` and
`prime serve` pay their own start-up of tens of seconds anyway).
"""

from __future__ import annotations

import compileall
import importlib
import os
import site
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMMAND_MODULES = ("prime_cli.cli.main", "prime_cli.evals.api", "prime_cli.gepa.api", "prime_cli.clients.endpoints",
                   "prime_cli.runs.log", "prime_cli.evals.store", "prime_cli.tui.app", "openai")
LEFT_ALONE = {"torch", "vllm", "triton", "transformers", "nvidia"}  # huge, and only behind long start-ups


def touched_packages(site_packages: Path) -> set[Path]:
    """Top-level packages (folders) and single-file modules under site-packages that are imported now."""
    found = set()
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if not file:
            continue
        path = Path(file).resolve()
        try:
            top = path.relative_to(site_packages).parts[0]
        except ValueError:
            continue
        if top.split(".")[0] not in LEFT_ALONE and not top.endswith((".dist-info", ".so")):
            found.add(site_packages / top)
    return found


def load_example_environments() -> None:
    import prime_cli.envs as vf

    for folder in sorted((REPO / "environments").iterdir()):
        if (folder / "pyproject.toml").exists():
            try:
                vf.load_environment(folder.name.replace("_", "-")).get_eval_dataset(n=1)  # rows may import more
            except Exception:  # noqa: BLE001, S112 - one that needs a key, a service or hub data still imported its modules
                continue


def main() -> int:
    start = time.perf_counter()
    os.environ.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")  # an environment's hub data set: fail fast
    site_packages = Path(site.getsitepackages()[0]).resolve()
    for name in COMMAND_MODULES:
        importlib.import_module(name)
    load_example_environments()
    targets = sorted(touched_packages(site_packages)) + [REPO / "prime_cli"]
    for target in targets:  # a file that does not compile (a template, a test for another Python) is skipped
        if target.is_dir():
            compileall.compile_dir(target, quiet=2, workers=os.cpu_count() or 1)
        elif target.suffix == ".py":
            compileall.compile_file(target, quiet=2)
    print(f"compiled {len(targets)} packages that prime's commands import in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
