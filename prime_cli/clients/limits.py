"""A per-endpoint concurrency limit that survives being used from more than one event loop."""

from __future__ import annotations

import asyncio


class LoopSemaphore:
    """An asyncio.Semaphore created lazily for the running loop (a new loop gets a fresh one)."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("max_concurrent must be at least 1")
        self.limit = limit
        self._semaphore: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def get(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._semaphore is None or self._loop is not loop:
            self._semaphore = asyncio.Semaphore(self.limit)
            self._loop = loop
        return self._semaphore
