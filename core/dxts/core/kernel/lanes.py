"""Lanes: a few batches of one round in flight at a time, as the sequential loop would end.

A sweep that writes in batches (the recorder's transactions, the dispatcher's polled pages) can
keep the database or another service busy with one batch while it prepares the next. `in_flight`
runs at most `width` batches at once and sums what they report; like the loop it replaces, the
round ends with the first failure, raised as itself (not wrapped in an exception group), once
the other batches are cancelled. Each batch must stand on its own (its own transaction, pages
of disjoint keys), so that a cancelled one leaves nothing half done.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager


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
