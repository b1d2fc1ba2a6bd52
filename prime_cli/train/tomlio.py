"""TOML in (tomllib, or tomli on Python 3.10) and a small plain-text TOML writer for `--dry-run`."""

from __future__ import annotations

import json
import sys
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib as _toml
else:  # pragma: no cover - Python 3.10
    import tomli as _toml


def toml_loads(text: str) -> dict[str, Any]:
    return _toml.loads(text)


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_scalar(v) for v in value if v is not None) + "]"
    if isinstance(value, dict):
        inner = ", ".join(f"{_key(k)} = {_scalar(v)}" for k, v in value.items() if v is not None)
        return "{ " + inner + " }" if inner else "{}"
    return json.dumps(str(value))


def _key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else json.dumps(key)


def _is_table_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _emit(data: dict[str, Any], name: str, out: list[str]) -> None:
    scalars: list[str] = []
    subs: list[tuple[str, Any]] = []
    for key, value in data.items():
        if isinstance(value, dict) or _is_table_list(value):
            subs.append((key, value))
        elif value is None:
            scalars.append(f"# {_key(key)} = (not set)")
        else:
            scalars.append(f"{_key(key)} = {_scalar(value)}")
    if not name:
        out.extend(scalars)
    elif scalars or not subs:
        out.extend(["", f"[{name}]", *scalars])
    for key, value in subs:
        full = f"{name}.{_key(key)}" if name else _key(key)
        if isinstance(value, dict):
            _emit(value, full, out)
            continue
        for item in value:  # array of tables: values inside are written inline
            out.extend(["", f"[[{full}]]"])
            out.extend(f"{_key(k)} = {_scalar(v)}" for k, v in item.items() if v is not None)


def dumps(data: dict[str, Any]) -> str:
    """TOML for a nested dict; None values are written as comments (`# key = (not set)`)."""
    out: list[str] = []
    _emit(data, "", out)
    return "\n".join(out).strip() + "\n"
