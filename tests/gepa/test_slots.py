"""Rollout slots: priorities, the background cap, and a waiting group moving up when it becomes urgent."""

import asyncio

from prime_cli.gepa.evaluator import BACKGROUND, SEARCH, VALIDATION, Slots, _Ticket


def test_waiters_are_served_by_priority_then_arrival_and_background_is_capped():
    async def main():
        slots = Slots(2, background_limit=1)
        order = []

        async def job(name, priority, hold):
            ticket = _Ticket(priority)
            background = await slots.acquire(ticket, 1)
            order.append(name)
            await hold.wait()
            slots.release(1, background)

        hold = asyncio.Event()
        tasks = [asyncio.ensure_future(job(n, p, hold)) for n, p in
                 [("bg1", BACKGROUND), ("bg2", BACKGROUND), ("val", VALIDATION), ("mb", SEARCH)]]
        await asyncio.sleep(0.01)
        assert order == ["bg1", "val"]  # bg2 waits for the cap; the val pass takes the second slot
        hold.set()
        await asyncio.gather(*tasks)
        assert order == ["bg1", "val", "mb", "bg2"]  # the minibatch goes before the queued background work
        assert slots.free == 2 and slots.background == 0

    asyncio.run(main())


def test_a_raised_priority_and_a_cancelled_waiter():
    async def main():
        slots = Slots(1)
        first = _Ticket(SEARCH)
        taken = await slots.acquire(first, 1)
        late, urgent = _Ticket(BACKGROUND), _Ticket(VALIDATION)
        a = asyncio.ensure_future(slots.acquire(late, 1))
        b = asyncio.ensure_future(slots.acquire(urgent, 1))
        c = asyncio.ensure_future(slots.acquire(_Ticket(SEARCH), 1))
        await asyncio.sleep(0)
        c.cancel()
        late.priority = SEARCH  # someone the search waits for joined the background group
        slots.wake()
        slots.release(1, taken)
        await asyncio.sleep(0)
        assert a.done() and not b.done()
        slots.release(1, a.result())
        await asyncio.sleep(0)
        assert b.done() and slots.free == 0
        slots.release(1, b.result())
        assert slots.free == 1 and not slots._waiters

    asyncio.run(main())
