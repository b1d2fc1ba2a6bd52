"""`configs/endpoints.py` in the verifiers form, read without running it:

    ENDPOINTS = {
        "qwen3-8b": {"model": "Qwen/Qwen3-8B", "url": "http://0.0.0.0:8007/v1", "key": "VLLM_API_KEY"},
    }

The file is parsed, never imported: `ENDPOINTS` must be a literal dict (a value may also be a list of
such dicts: replicas). Each entry becomes the `[[endpoint]]` block of endpoints.toml it stands for;
`"key": "local"` (or "EMPTY"), as the guide writes it for a local vLLM server, means no key.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from .errors import ClientConfigError

NO_KEY_WORDS = ("local", "EMPTY", "")


def endpoint_blocks(path: Path, text: str) -> list[dict[str, Any]]:
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        raise ClientConfigError(f"{path}: invalid Python on line {exc.lineno}") from None
    value = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ENDPOINTS" for t in node.targets):
            value = node.value
    if value is None:
        raise ClientConfigError(f"{path}: no ENDPOINTS = {{...}} assignment (the verifiers form of an endpoint registry)")
    try:
        endpoints = ast.literal_eval(value)
    except ValueError:
        raise ClientConfigError(f"{path}: ENDPOINTS must be a literal dict of dicts (the file is read, not run)") from None
    if not isinstance(endpoints, dict):
        raise ClientConfigError(f"{path}: ENDPOINTS must be a dict of endpoint id -> {{model, url, key}}")
    blocks = []
    for endpoint_id, entry in endpoints.items():
        for replica in entry if isinstance(entry, list) else [entry]:
            if not isinstance(replica, dict):
                raise ClientConfigError(f"{path}: ENDPOINTS[{endpoint_id!r}] must be a dict with model, url and key")
            block = {"endpoint_id": endpoint_id, **replica}
            if block.get("key") in NO_KEY_WORDS:
                del block["key"]
            blocks.append(block)
    return blocks
