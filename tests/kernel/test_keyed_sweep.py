"""The round shape every per-key sweep shares (`KeyedSweep`): each key under its named lock,
skipped when another holder has it, `width` keys at a time, one key's failure isolated, and a
round whose every key failed raised (so the runner backs off). On both databases: the lock is
GET_LOCK on MariaDB, in-process on SQLite."""

from __future__ import annotations

import asyncio
import logging

import pytest

from dxts.core.db import Database
from dxts.core.ids import new_id
from dxts.core.kernel.sweeps import KeyedSweep
from dxts.core.locks import Held, Lock, LockKind, LockManager


def sweep(locks: LockManager, width: int = 4) -> KeyedSweep[bytes]:
    return KeyedSweep(LockKind.FEEDER, locks, width, key=lambda key: key)


async def test_a_key_another_holder_has_is_skipped_and_the_others_run(database: Database) -> None:
    mine, other = LockManager(database), LockManager(database)
    keys = [new_id() for _ in range(3)]

    async def work(key: bytes) -> bytes:
        return key

    async with other.try_hold(Lock(LockKind.FEEDER, keys[1])) as held:
        assert held
        assert await sweep(mine).run(keys, work) == [keys[0], keys[2]]
    assert await sweep(mine).run(keys, work) == keys
    await mine.dispose()
    await other.dispose()


async def test_at_most_width_keys_run_at_once(database: Database) -> None:
    locks = LockManager(database)
    running, most = 0, 0

    async def work(key: bytes) -> int:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.02)
        running -= 1
        return 1

    assert sum(await sweep(locks, width=2).run([new_id() for _ in range(6)], work)) == 6
    assert most == 2
    await locks.dispose()


async def test_one_key_failing_is_logged_and_the_others_go_on(
    database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    locks = LockManager(database)
    bad = new_id()

    async def work(key: bytes) -> int:
        if key == bad:
            raise RuntimeError("this one's plugin raised")
        return 1

    with caplog.at_level(logging.ERROR):
        done = await sweep(locks).run([new_id(), bad, new_id()], work)
    assert done == [1, 1]
    assert "this one's plugin raised" in caplog.text
    # Its lock was released: the next round takes it again.
    assert await sweep(locks).run([bad], lambda key: asyncio.sleep(0, 7)) == [7]
    await locks.dispose()


async def test_a_round_whose_every_key_failed_raises(database: Database) -> None:
    locks = LockManager(database)

    async def work(key: bytes) -> int:
        raise ConnectionError("the database is away")

    with pytest.raises(ConnectionError):
        await sweep(locks).run([new_id(), new_id()], work)
    assert await sweep(locks).run([], work) == []
    await locks.dispose()


async def test_a_key_s_work_can_see_its_hold(database: Database) -> None:
    """Work that keeps its key for a lease is handed the hold: it is the key's lock, held while
    the work runs, and released after."""
    locks, other = LockManager(database), LockManager(database)
    key = new_id()

    async def work(item: bytes, held: Held) -> bool:
        assert held.lock == Lock(LockKind.FEEDER, item)
        async with other.try_hold(held.lock) as elsewhere:
            assert not elsewhere
        return await held.still_held()

    assert await sweep(locks).run_holding([key], work) == [True]
    async with other.try_hold(Lock(LockKind.FEEDER, key)) as after:
        assert after
    await locks.dispose()
    await other.dispose()
