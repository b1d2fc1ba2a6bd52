"""TOML in (tomllib) and a small plain-text TOML writer for `--dry-run`."""

from __future__ import annotations

import json
import re
from typing import Any

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")  # TOML's bare keys: ASCII only


def toml_loads(text: str) -> dict[str, Any]:
    import tomllib  # lazy: start-up

    return tomllib.loads(text)


def _quoted(text: str) -> str:
    # JSON escapes what TOML's basic strings must escape except DEL, which TOML forbids raw
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _scalar(value: Any, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return _quoted(value)
    if isinstance(value, (list, tuple)):
        if any(v is None for v in value):  # TOML has no null; leaving it out would move the items after it
            raise ValueError(f"{where}: TOML cannot hold None inside a list ({value!r})")
        return "[" + ", ".join(_scalar(v, where) for v in value) + "]"
    if isinstance(value, dict):
        inner = ", ".join(f"{_key(k)} = {_scalar(v, f'{where}.{k}')}" for k, v in value.items() if v is not None)
        return "{ " + inner + " }" if inner else "{}"
    return _quoted(str(value))


def _key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _quoted(key)


def _is_table_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _emit(data: dict[str, Any], name: str, out: list[str], path: str = "") -> None:
    scalars: list[str] = []
    subs: list[tuple[str, Any]] = []
    for key, value in data.items():
        if isinstance(value, dict) or _is_table_list(value):
            subs.append((key, value))
        elif value is None:
            scalars.append(f"# {_key(key)} = (not set)")
        else:
            scalars.append(f"{_key(key)} = {_scalar(value, f'{path}{key}')}")
    if not name:
        out.extend(scalars)
    elif scalars or not subs:
        out.extend(["", f"[{name}]", *scalars])
    for key, value in subs:
        full = f"{name}.{_key(key)}" if name else _key(key)
        if isinstance(value, dict):
            _emit(value, full, out, f"{path}{key}.")
            continue
        for item in value:  # array of tables: values inside are written inline
            out.extend(["", f"[[{full}]]"])
            out.extend(f"{_key(k)} = {_scalar(v, f'{path}{key}.{k}')}" for k, v in item.items() if v is not None)


def dumps(data: dict[str, Any]) -> str:
    """TOML for a nested dict; None values are written as comments (`# key = (not set)`), left out inside
    inline tables, and refused (ValueError naming the key) inside a list, where TOML has nothing to write."""
    out: list[str] = []
    _emit(data, "", out)
    return "\n".join(out).strip() + "\n"
