"""Awaiting a set of tasks so that no failure is lost and nothing runs on after one.

`asyncio.gather` raises the first exception but leaves the other awaitables running: they go on writing
files and calling models after the caller has moved on, and their own exceptions are never retrieved.
`asyncio.TaskGroup` fixes that but raises an ExceptionGroup; callers here catch the first exception as it is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any


async def gather_or_cancel(*awaitables: Awaitable[Any]) -> list[Any]:
    """The results of `awaitables` in order. When one raises (or this is cancelled), the others are
    cancelled and awaited before the first exception is raised."""
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
