"""Runtime LoRA loading on a running vLLM server (`VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`, `--enable-lora`):
load and unload adapters by name, and list what the server serves. Shared by the trainer plugin (through
`prime_cli.train.plugin_api`), which hot-loads each new policy, and the eval checkpoint sweep."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from .model_dir import vllm_adapter_path

# the ranks vLLM accepts for --max-lora-rank
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


class AdapterLoadError(Exception):
    pass


def server_root(base_url: str) -> str:
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def vllm_lora_rank(rank: int) -> int:
    """The smallest --max-lora-rank vLLM accepts that holds an adapter of rank `rank`."""
    return next((r for r in VLLM_LORA_RANKS if r >= rank), max(rank, VLLM_LORA_RANKS[-1]))


def _post(base_url: str, route: str, body: dict[str, Any], headers: dict[str, str] | None,
          timeout: float) -> None:
    request = urllib.request.Request(f"{server_root(base_url)}{route}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json", **(headers or {})},
                                     method="POST")
    with urllib.request.urlopen(request, timeout=timeout) as response:
        response.read()


def load_adapter(base_url: str, name: str, path: Path, timeout: float = 300.0, *, inplace: bool = True,
                 headers: dict[str, str] | None = None) -> None:
    """POST /v1/load_lora_adapter; with `inplace`, an adapter of the same name is replaced (it keeps
    its LoRA id, so prefix-cached blocks of the old weights survive unless the cache is reset)."""
    body = {"lora_name": name, "lora_path": str(vllm_adapter_path(path).resolve()), "load_inplace": inplace}
    try:
        _post(base_url, "/v1/load_lora_adapter", body, headers, timeout)
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:500]
        raise AdapterLoadError(f"vLLM refused the adapter {path} (HTTP {exc.code}): {detail}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise AdapterLoadError(f"the inference server at {base_url} is unreachable while loading {path}: "
                               f"{getattr(exc, 'reason', exc)}") from None


def unload_adapter(base_url: str, name: str, timeout: float = 60.0, headers: dict[str, str] | None = None) -> bool:
    """POST /v1/unload_lora_adapter. False when the server had no such adapter (or no such route)."""
    try:
        _post(base_url, "/v1/unload_lora_adapter", {"lora_name": name}, headers, timeout)
    except urllib.error.HTTPError:
        return False
    except (urllib.error.URLError, OSError) as exc:
        raise AdapterLoadError(f"the inference server at {base_url} is unreachable while unloading {name}: "
                               f"{getattr(exc, 'reason', exc)}") from None
    return True


def served_model_cards(base_url: str, headers: dict[str, str] | None = None,
                       timeout: float = 10.0) -> list[dict[str, Any]] | None:
    """GET /v1/models' entries (vLLM adds `root`: the model's path, and `parent` for an adapter),
    or None when the server does not answer so."""
    request = urllib.request.Request(f"{server_root(base_url)}/v1/models", headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            data = json.loads(response.read())
        return [card for card in data.get("data", []) if isinstance(card, dict) and "id" in card]
    except (OSError, urllib.error.URLError, ValueError, AttributeError):
        return None
