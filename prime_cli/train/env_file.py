"""`env_file = ["secrets.env"]`: KEY=VALUE files whose variables every part of a run gets.

Only the file names are kept in the config (and in config.json); the values are read when a part starts
and never written, logged or shown. A problem is reported by file and line, never by value.
"""

from __future__ import annotations

import re
from pathlib import Path

from .errors import TrainConfigError

_LINE = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$")


def resolve_env_files(names: object, config_dir: Path) -> list[str]:
    """Absolute paths (a relative name is looked up next to the config file, then in the working folder)."""
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise TrainConfigError(f'env_file must be a list of file names, e.g. env_file = ["secrets.env"] (got {names!r})')
    found = []
    for name in names:
        candidates = [Path(name)] if Path(name).is_absolute() else [config_dir / name, Path.cwd() / name]
        path = next((c for c in candidates if c.is_file()), None)
        if path is None:
            raise TrainConfigError(f"env_file {name!r}: no such file (looked in {config_dir} and {Path.cwd()}); "
                                   "create it with KEY=VALUE lines or remove it from env_file")
        read_env_file(path)  # reports a malformed line now rather than when the run starts
        found.append(str(path.resolve()))
    return found


def read_env_file(path: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TrainConfigError(f"env_file {path}: cannot read it ({type(exc).__name__})") from None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _LINE.match(stripped)
        if match is None:
            raise TrainConfigError(f"env_file {path} line {number} is not KEY=VALUE (the value is not shown); "
                                   "fix that line or comment it out with #")
        value = match.group(2).strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[match.group(1)] = value
    return values


def env_file_values(paths: list[str]) -> dict[str, str]:
    """The variables of every file, later files winning."""
    values: dict[str, str] = {}
    for path in paths:
        values.update(read_env_file(Path(path)))
    return values
