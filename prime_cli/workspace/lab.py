"""`prime lab setup`: write a ready workspace, idempotently.

Every file written is recorded with its content hash in `.prime/lab.json`. On the next run a file
is rewritten only when it still has the recorded hash (the user has not touched it) and the
template changed; a file the user changed, or one that was there before prime wrote it, is kept
unless `force` is given.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .names import module_name
from .templates import (
    ENDPOINTS,
    EXAMPLES,
    GITIGNORE,
    eval_config,
    gepa_config,
    prime_rl_config,
    rl_config,
)

MANIFEST = Path(".prime") / "lab.json"
SKIP_PARTS = {"__pycache__", "outputs", ".pytest_cache"}
REPO_ENVIRONMENTS = Path(__file__).resolve().parents[2] / "environments"
REPO_CPU_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "rl" / "reverse-text-cpu.toml"


@dataclass
class FileAction:
    path: Path  # relative to the workspace
    action: str  # created | updated | unchanged | kept (changed by you) | overwritten


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def example_source(env_id: str) -> Path | None:
    """The folder of an example environment: this checkout's environments/, else where it is installed."""
    module = module_name(env_id)
    folder = REPO_ENVIRONMENTS / module
    if (folder / "pyproject.toml").is_file():
        return folder
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin:
        return None
    origin = Path(spec.origin).resolve()
    for candidate in (origin.parent, origin.parent.parent):
        if (candidate / "pyproject.toml").is_file():
            return candidate
    return None


def _example_files(source: Path) -> Iterator[tuple[Path, bytes]]:
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        if path.is_file() and not (SKIP_PARTS & set(relative.parts)) and not any(
                part.endswith(".egg-info") for part in relative.parts) and path.suffix != ".pyc":
            yield relative, path.read_bytes()


def planned_files(prime_rl_only: bool = False) -> dict[Path, bytes]:
    """Everything setup writes; with prime_rl_only the v0.4 training configs and the environments."""
    files: dict[Path, bytes] = {
        Path("configs/endpoints.toml"): ENDPOINTS.encode(),
        Path(".gitignore"): GITIGNORE.encode(),
    }
    # the CPU-sized reverse-text run of this checkout (prime-rl v0.4 shape), beside the GPU-sized configs
    cpu = "configs/prime-rl/reverse-text-cpu.toml" if prime_rl_only else "configs/rl/reverse-text-cpu.toml"
    if REPO_CPU_CONFIG.is_file():
        text = REPO_CPU_CONFIG.read_text(encoding="utf-8")
        files[Path(cpu)] = text.replace("configs/rl/reverse-text-cpu.toml", cpu).encode()
    else:
        cpu = None
    for example in EXAMPLES:
        if not prime_rl_only:
            files[Path(f"configs/eval/{example.env_id}.toml")] = eval_config(example).encode()
            files[Path(f"configs/gepa/{example.env_id}.toml")] = gepa_config(example).encode()
            files[Path(f"configs/rl/{example.env_id}.toml")] = rl_config(example, cpu).encode()
        files[Path(f"configs/prime-rl/{example.env_id}.toml")] = prime_rl_config(example, cpu).encode()
        source = example_source(example.env_id)
        if source is not None:
            for relative, data in _example_files(source):
                files[Path("environments") / module_name(example.env_id) / relative] = data
    return files


def setup_lab(root: Path | None = None, force: bool = False, prime_rl_only: bool = False) -> list[FileAction]:
    """Write the workspace under `root`; returns what happened to each file."""
    root = (root or Path.cwd()).resolve()
    manifest_path = root / MANIFEST
    try:
        manifest: dict[str, str] = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    except (json.JSONDecodeError, OSError):
        manifest = {}
    actions = []
    for relative, data in planned_files(prime_rl_only).items():
        target = root / relative
        key = relative.as_posix()
        wanted = _digest(data)
        if not target.exists():
            action = "created"
        else:
            current = _digest(target.read_bytes())
            if current == wanted:
                manifest[key] = wanted
                actions.append(FileAction(relative, "unchanged"))
                continue
            if force:
                action = "overwritten"
            elif manifest.get(key) == current:  # ours and untouched: a newer template replaces it
                action = "updated"
            else:
                actions.append(FileAction(relative, "kept (changed by you; --force overwrites)"))
                continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        manifest[key] = wanted
        actions.append(FileAction(relative, action))
    manifest_path.parent.mkdir(parents=True, exist_ok=True)
    manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return actions

