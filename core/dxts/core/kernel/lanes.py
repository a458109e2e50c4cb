"""The one way dxts runs "N in flight": a few tasks at a time, as the sequential loop would end.

A sweep that writes in batches (the recorder's transactions, the dispatcher's polled pages) can
keep the database or another service busy with one batch while it prepares the next. `in_flight`
runs at most `width` batches at once and sums what they report; like the loop it replaces, the
round ends with the first failure, raised as itself (not wrapped in an exception group), once
the other batches are cancelled. Each batch must stand on its own (its own transaction, pages
of disjoint keys), so that a cancelled one leaves nothing half done. `each` is the same for a
list known up front whose results are wanted in order (a sweep's keys, a recording's
transactions).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Lanes:
    """The running round: `start` a batch when a lane is free; `total` sums their results."""

    def __init__(self, width: int, group: asyncio.TaskGroup) -> None:
        self._free = asyncio.Semaphore(max(1, width))
        self._group = group
        self.total = 0

    async def start(self, batch: Callable[[], Awaitable[int]]) -> None:
        """Wait for a free lane, then run `batch` in it."""
        await self._free.acquire()
        self._group.create_task(self._run(batch))

    async def _run(self, batch: Callable[[], Awaitable[int]]) -> None:
        try:
            done = await batch()
            self.total += done  # after the await: every lane adds to the same total
        finally:
            self._free.release()


@asynccontextmanager
async def in_flight(width: int) -> AsyncIterator[Lanes]:
    """At most `width` batches in flight; leaving waits for them all."""
    try:
        async with asyncio.TaskGroup() as group:
            yield Lanes(width, group)
    except* Exception as failed:  # the first failure, as the sequential loop raised it
        raise failed.exceptions[0] from None


async def each(items: Sequence[T], work: Callable[[T], Awaitable[R]], *, width: int) -> list[R]:
    """`work` on every item, at most `width` at once; the results in the items' order. The first
    failure cancels the others and is raised as itself."""
    if len(items) <= 1 or width <= 1:
        return [await work(item) for item in items]
    done: dict[int, R] = {}

    def one(index: int, item: T) -> Callable[[], Awaitable[int]]:
        async def run() -> int:
            done[index] = await work(item)
            return 0

        return run

    async with in_flight(width) as lanes:
        for index, item in enumerate(items):
            await lanes.start(one(index, item))
    return [done[index] for index in range(len(items))]
