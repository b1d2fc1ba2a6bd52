"""`local-moe`: a small Mixture-of-Experts model that speaks, sparse-upcycled once from the embedded SmolLM2.

Each of its experts is a copy of SmolLM2's MLP and Mixtral renormalises the top-k routing weights,
so it computes SmolLM2's output while its router (small random weights, fixed seed) sends different
tokens to different experts: adapters on the experts can diverge. It is built in a child process
(prime_cli/serve/upcycle.py) into the cache beside the embedded model, with a manifest of every
file's size and sha256 checked on each use, and rebuilt when damaged or made by another recipe.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .embedded import (
    Status,
    _missing_package_hint,
    ensure_embedded_model,
    read_manifest,
    verify_model_folder,
    write_manifest,
)
from .errors import ServeError
from .paths import models_dir

NUM_EXPERTS = 4
TOP_K = 2
ROUTER_SEED = 0
ROUTER_STD = 0.02  # Mixtral's initializer_range; the scale does not change which experts win
LOCAL_MOE_NAME = f"SmolLM2-{NUM_EXPERTS}x135M-Instruct"
"""The served model id of `local-moe` (Mixtral's `NxSIZE` naming)."""


def local_moe_dir() -> Path:
    return models_dir() / LOCAL_MOE_NAME.lower()


def recipe(dense: Path) -> dict:
    """How the folder is made: a change here (or in the dense weights) rebuilds it."""
    dense_weights = read_manifest(dense).get("files", {}).get("model.safetensors", {}).get("sha256")
    return {"experts": NUM_EXPERTS, "top_k": TOP_K, "router_seed": ROUTER_SEED, "router_std": ROUTER_STD,
            "dense_sha256": dense_weights}


def ensure_local_moe_model(status: Status = lambda _: None) -> Path:
    """The verified `local-moe` folder, upcycling the embedded model first when it is missing or damaged."""
    dense = ensure_embedded_model(status)
    target = local_moe_dir()
    problem = verify_model_folder(target)
    if problem is None and read_manifest(target).get("recipe") != recipe(dense):
        problem = "made from other weights or with other settings"
    if problem is None:
        return target
    if target.exists():
        status(f"the cached model is unusable ({problem}); rebuilding it")
    status(f"upcycling {dense.name} into {LOCAL_MOE_NAME} ({NUM_EXPERTS} experts, {TOP_K} active; "
           "once; ~20 s, 1.5 GB)")
    started = time.perf_counter()
    materialise(dense, target)
    status(f"model ready in {target} ({time.perf_counter() - started:.0f} s)")
    return target


def materialise(dense: Path, target: Path) -> None:
    """Upcycle into a temporary sibling folder, then rename it into place (never half-written)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        cmd = [sys.executable, "-m", "prime_cli.serve.upcycle", str(dense), str(work),
               str(NUM_EXPERTS), str(TOP_K), str(ROUTER_SEED), str(ROUTER_STD)]
        done = subprocess.run(cmd, capture_output=True, text=True,
                              env={**os.environ, "TRANSFORMERS_VERBOSITY": "error",
                                   "HF_HUB_OFFLINE": "1", "TQDM_DISABLE": "1"})
        if done.returncode != 0:
            lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
            raise ServeError(f"upcycling {dense.name} failed: {lines[-1] if lines else 'no output'}"
                             + _missing_package_hint(done.stderr))
        write_manifest(work, LOCAL_MOE_NAME, f"{dense.name} (sparse upcycling)", recipe=recipe(dense))
        if target.exists():
            shutil.rmtree(target)
        work.replace(target)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
