"""The policy's weights as the orchestrator sees them: the newest adapter the trainer wrote, hot-loaded into vLLM."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from pathlib import Path

from ..run_dir import steps_in


class AdapterLoadError(Exception):
    pass


def newest_step(output_dir: Path) -> int | None:
    steps = steps_in(output_dir / "weights")
    return steps[-1] if steps else None


def server_root(base_url: str) -> str:
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def load_adapter(base_url: str, name: str, path: Path, timeout: float = 300.0) -> None:
    """POST /v1/load_lora_adapter, replacing the adapter of the same name in place."""
    body = json.dumps({"lora_name": name, "lora_path": str(path.resolve()), "load_inplace": True}).encode()
    request = urllib.request.Request(f"{server_root(base_url)}/v1/load_lora_adapter", data=body,
                                     headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read()
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:500]
        raise AdapterLoadError(f"vLLM refused the adapter {path} (HTTP {exc.code}): {detail}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise AdapterLoadError(f"the inference server at {base_url} is unreachable while loading {path}: "
                               f"{getattr(exc, 'reason', exc)}") from None


class PolicyWeights:
    """Tracks the loaded weights step; waits for the trainer when the batch may not be older."""

    def __init__(self, output_dir: Path, base_url: str, name: str, poll_s: float = 0.2):
        self.output_dir, self.base_url, self.name, self.poll_s = output_dir, base_url, name, poll_s
        self.loaded: int | None = None
        self.last_load_s = 0.0

    async def ensure(self, min_step: int) -> float:
        """Load the newest weights, waiting until they are at least `min_step`. Returns seconds waited."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        while True:
            newest = newest_step(self.output_dir)
            if newest is not None and newest >= min_step:
                break
            await asyncio.sleep(self.poll_s)
        waited = loop.time() - started
        self.last_load_s = 0.0
        if self.loaded is None or newest > self.loaded:
            path = self.output_dir / "weights" / f"step_{newest}"
            await asyncio.to_thread(load_adapter, self.base_url, self.name, path)
            self.loaded = newest
            self.last_load_s = loop.time() - started - waited
        return waited
