"""The policy's weights as the orchestrator sees them: the newest adapter the trainer wrote, hot-loaded into vLLM."""

from __future__ import annotations

import asyncio
import json
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path

from prime_cli.train.plugin_api import (
    AdapterLoadError,
    TrainingRunLayout,
    load_adapter,
    server_root,
)

from .servers import InferencePool, InferenceServerHandle


def reset_prefix_cache(base_url: str, attempts: int = 50, wait_s: float = 0.1, timeout: float = 60.0) -> bool:
    """POST /reset_prefix_cache (vLLM dev mode, which the launcher turns on). A new adapter loaded in
    place keeps its LoRA id, and vLLM's prefix-cache keys hold the id, not the weights: without a
    reset, prompts (the system prompt's blocks above all) would reuse KV computed by older weights.
    vLLM refuses while blocks are held by running requests; retried. False if the server has no
    such endpoint (a server prime did not start)."""
    for _ in range(attempts):
        request = urllib.request.Request(f"{server_root(base_url)}/reset_prefix_cache", data=b"", method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                if json.loads(response.read() or b"{}").get("success", True):
                    return True
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return False
            raise AdapterLoadError(f"vLLM could not reset its prefix cache (HTTP {exc.code})") from None
        except (urllib.error.URLError, OSError) as exc:
            raise AdapterLoadError(f"the inference server at {base_url} is unreachable while resetting its prefix "
                                   f"cache: {getattr(exc, 'reason', exc)}") from None
        time.sleep(wait_s)
    raise AdapterLoadError(f"vLLM kept refusing to reset its prefix cache ({attempts} tries): requests still running")


class PolicyWeights:
    """Tracks the loaded weights step; waits for the trainer when the batch may not be older. Each adapter
    goes into every live inference server before any group samples from it."""

    def __init__(self, output_dir: Path, servers: str | InferencePool, name: str, poll_s: float = 0.2):
        self.output_dir, self.name, self.poll_s = output_dir, name, poll_s
        self.pool = servers if isinstance(servers, InferencePool) else InferencePool.single(servers)
        self.loaded: int | None = None
        self.last_load_s = 0.0
        self.last_before_load_s = 0.0  # of that wait: for the online eval on the old weights to end
        self.warned = False

    async def ensure(self, min_step: int, cap: int | None = None,
                     before_load: Callable[[], Awaitable[None]] | None = None) -> float:
        """Load the newest weights, waiting until they are at least `min_step`, but none newer than `cap`
        (a step due for an online eval) while the weights of `cap` are there and old enough; `before_load`
        is awaited before the adapter changes (the eval using the loaded one finishes). Returns seconds waited."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        while True:
            steps = TrainingRunLayout(self.output_dir).weight_steps()
            newest = steps[-1] if steps else None
            if newest is not None and newest >= min_step:
                break
            await asyncio.sleep(self.poll_s)
        waited = loop.time() - started
        if cap is not None and min_step <= cap < newest and cap in steps and (self.loaded is None or cap > self.loaded):
            newest = cap
        self.last_load_s = self.last_before_load_s = 0.0
        if self.loaded is None or newest > self.loaded:
            if before_load is not None:
                before = loop.time()
                await before_load()
                self.last_before_load_s = loop.time() - before
                waited += self.last_before_load_s
            path = TrainingRunLayout(self.output_dir).weights_dir(newest)
            await self.pool.for_each_live(lambda server: self._load(server, path, first=self.loaded is None),
                                          AdapterLoadError, strict=self.loaded is None)
            self.loaded = newest
            self.last_load_s = loop.time() - started - waited
        return waited

    async def _load(self, server: InferenceServerHandle, path: Path, first: bool) -> None:
        try:
            await asyncio.to_thread(load_adapter, server.url, self.name, path)
        except AdapterLoadError as exc:
            if first and len(self.pool.servers) > 1:  # the run's first load checks that every server sees output_dir
                raise AdapterLoadError(f"{exc} (every inference server loads the adapters from {self.output_dir}: "
                                       f"the server at {server.url} must see that folder at the same path, e.g. "
                                       "on a shared filesystem)") from None
            raise
        if not await asyncio.to_thread(reset_prefix_cache, server.url) and not self.warned:
            self.warned = True
            print("warning: the inference server has no /reset_prefix_cache (start vLLM with "
                  "VLLM_SERVER_DEV_MODE=1): cached prompt blocks may come from older weights",
                  file=sys.stderr, flush=True)
