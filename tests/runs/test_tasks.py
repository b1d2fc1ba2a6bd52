"""gather_or_cancel: the first failure stops the siblings before it is raised (asyncio.gather leaves them
running: a rescore would go on appending rows to a store its caller had already closed)."""

import asyncio

import pytest

from prime_cli.runs.tasks import gather_or_cancel


async def _siblings(gather) -> tuple[list[str], BaseException | None]:
    events: list[str] = []

    async def fails() -> None:
        await asyncio.sleep(0.01)
        raise OSError("disk full")

    async def slow(name: str) -> str:
        try:
            await asyncio.sleep(0.2)
            events.append(f"{name} wrote")
            return name
        except asyncio.CancelledError:
            events.append(f"{name} cancelled")
            raise

    caught = None
    try:
        await gather(fails(), slow("a"), slow("b"))
    except OSError as exc:
        caught = exc
    events.append("caller moved on")
    await asyncio.sleep(0.3)
    return events, caught


def test_plain_gather_lets_the_siblings_write_after_the_caller_moved_on():
    events, caught = asyncio.run(_siblings(asyncio.gather))
    assert isinstance(caught, OSError)
    assert events == ["caller moved on", "a wrote", "b wrote"]  # the pattern gather_or_cancel exists for


def test_the_first_failure_cancels_and_awaits_the_siblings_before_it_is_raised():
    events, caught = asyncio.run(_siblings(gather_or_cancel))
    assert isinstance(caught, OSError) and str(caught) == "disk full"
    assert events == ["a cancelled", "b cancelled", "caller moved on"]


def test_results_come_back_in_order():
    async def value(x: int, delay: float) -> int:
        await asyncio.sleep(delay)
        return x

    assert asyncio.run(gather_or_cancel(value(1, 0.02), value(2, 0.0), value(3, 0.01))) == [1, 2, 3]


def test_cancelling_the_caller_cancels_every_child():
    cancelled: list[int] = []

    async def child(i: int) -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(i)
            raise

    async def main() -> None:
        outer = asyncio.ensure_future(gather_or_cancel(child(1), child(2)))
        await asyncio.sleep(0.01)
        outer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await outer

    asyncio.run(main())
    assert sorted(cancelled) == [1, 2]
