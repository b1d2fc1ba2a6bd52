"""What a pushed environment records about how it was pushed, and reading it back once installed.

`prime env push` adds `prime_provenance.json` to the wheel's .dist-info folder (a wheel may carry
extra metadata files; its RECORD lists the file with its hash), so every installed copy keeps it and
`importlib.metadata` reads it back: the prime version that pushed it, the `prime env check` verdict
(or that the check was skipped), the index and the time.
"""

from __future__ import annotations

import base64
import hashlib
import json
import zipfile
from pathlib import Path
from typing import Any

FILE_NAME = "prime_provenance.json"


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def add_to_wheel(wheel: Path, provenance: dict[str, Any]) -> None:
    """Rewrite `wheel` with FILE_NAME in its .dist-info and a RECORD line for it."""
    data = (json.dumps(provenance, indent=1, sort_keys=True) + "\n").encode()
    with zipfile.ZipFile(wheel) as source:
        entries = [(info, source.read(info)) for info in source.infolist()]
    records = [info.filename for info, _ in entries if info.filename.endswith(".dist-info/RECORD")]
    if len(records) != 1:
        raise ValueError(f"{wheel.name} has {len(records)} .dist-info/RECORD files, expected 1")
    dist_info = records[0].rsplit("/", 1)[0]
    added = f"{dist_info}/{FILE_NAME}"
    rewritten = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(rewritten, "w", compression=zipfile.ZIP_DEFLATED) as target:
        for info, content in entries:
            if info.filename == added:
                continue
            if info.filename == records[0]:
                lines = [line for line in content.decode().splitlines() if line and not line.startswith(added + ",")]
                lines.insert(len(lines) - 1, f"{added},{_record_hash(data)},{len(data)}")  # RECORD stays last
                content = ("\n".join(lines) + "\n").encode()
                target.writestr(added, data)
            target.writestr(info, content)
    rewritten.replace(wheel)


def read_from_wheel(wheel: Path) -> dict[str, Any] | None:
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if name.endswith(f".dist-info/{FILE_NAME}"):
                return json.loads(archive.read(name))
    return None


def installed_provenance(module: str, module_file: str | None) -> tuple[str, str, dict[str, Any]] | None:
    """(distribution, version, provenance) of the installed distribution `module_file` (the module as loaded)
    belongs to, if it has one: a local ./environments/ copy used instead of it has none."""
    import importlib.metadata  # lazy: already loaded

    if not module_file:
        return None
    loaded = Path(module_file).resolve()
    for dist_name in importlib.metadata.packages_distributions().get(module, []):
        try:
            dist = importlib.metadata.distribution(dist_name)
        except importlib.metadata.PackageNotFoundError:
            continue
        text = dist.read_text(FILE_NAME)
        if text and any(dist.locate_file(file).resolve() == loaded for file in dist.files or []):
            try:
                return dist.metadata["Name"], dist.version, json.loads(text)
            except json.JSONDecodeError:
                continue
    return None


def describe(provenance: dict[str, Any]) -> str:
    """One line: `pushed 2026-11-29T04:40Z to team with prime 0.1.0; prime env check passed on 3 rows`."""
    check = provenance.get("check") or {}
    if check.get("verdict") == "passed":
        verdict = f"prime env check passed on {check.get('examples', '?')} rows"
        if check.get("skipped"):
            verdict += f" (not scored: {', '.join(check['skipped'])})"
    elif check.get("verdict") == "skipped":
        verdict = "prime env check was skipped (--skip-check)"
    else:
        verdict = "no prime env check verdict"
    where = f" to {provenance['index']}" if provenance.get("index") else ""
    return f"pushed {provenance.get('pushed_at', '?')}{where} with prime {provenance.get('prime_version', '?')}; {verdict}"
