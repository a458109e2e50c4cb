"""The kernel's lanes: a bounded number of batches in flight, their results summed, and a round
that ends with its first failure, as the sequential loop it replaces did."""

from __future__ import annotations

import asyncio
import functools

import pytest

from dxts.core.kernel.lanes import each, in_flight


async def test_at_most_width_batches_run_at_once_and_their_results_are_summed() -> None:
    running_now, most = 0, 0

    async def batch(n: int) -> int:
        nonlocal running_now, most
        running_now += 1
        most = max(most, running_now)
        await asyncio.sleep(0.01)
        running_now -= 1
        return n

    async with in_flight(2) as lanes:
        for n in range(1, 7):
            await lanes.start(functools.partial(batch, n))
    assert lanes.total == 21
    assert most == 2


async def test_the_first_failure_cancels_the_others_and_is_raised_as_itself() -> None:
    cancelled = asyncio.Event()

    async def slow() -> int:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return 1

    async def failing() -> int:
        await asyncio.sleep(0)
        raise ValueError("batch 2 cannot be written")

    with pytest.raises(ValueError, match="batch 2 cannot be written"):
        async with in_flight(2) as lanes:
            await lanes.start(slow)
            await lanes.start(failing)
    assert cancelled.is_set()


async def test_a_failure_between_batches_ends_the_round_too() -> None:
    async def one() -> int:
        return 1

    with pytest.raises(LookupError, match="the next page"):
        async with in_flight(1) as lanes:
            await lanes.start(one)
            raise LookupError("the next page could not be read")


async def test_each_keeps_the_items_order_with_width_in_flight() -> None:
    running_now, most = 0, 0

    async def work(n: int) -> int:
        nonlocal running_now, most
        running_now += 1
        most = max(most, running_now)
        await asyncio.sleep(0.01 * (5 - n))  # the later ones finish first
        running_now -= 1
        return n * 10

    assert await each([1, 2, 3, 4], work, width=3) == [10, 20, 30, 40]
    assert most == 3
    assert await each([], work, width=3) == []


async def test_each_raises_the_first_failure_as_itself() -> None:
    async def work(n: int) -> int:
        if n == 2:
            raise KeyError(n)
        await asyncio.sleep(0.01)
        return n

    with pytest.raises(KeyError):
        await each([1, 2, 3], work, width=3)
