"""MariaDB only: the packer against real concurrency — its lock, SKIP LOCKED at the claim, and
a packer cancelled, or its connection killed, in the middle of writing a batch."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import runner_support as s
import sqlalchemy as sa

from dxts.core.db import Database
from dxts.core.locks import LockManager
from dxts.core.plugins import ComputeParcel, InputRecord
from dxts.core.schema import execution
from dxts.execution.logic.feeding import run_feeder
from dxts.execution.logic.packing import pack, run_packer

pytestmark = pytest.mark.mariadb_only

# A hang guard only: a packer that waited on a held row would sit there for the server's lock
# wait timeout (50 s by default); these tests assert what was packed, not how fast.
GUARD_S = 30


class Gate:
    """A packer that takes every input, says so, and packs each alone once let through."""

    def __init__(self) -> None:
        self.offered = asyncio.Event()
        self.go = asyncio.Event()
        self.records: list[InputRecord] = []

    async def packer(self, *, inputs: AsyncIterator[InputRecord]) -> AsyncIterator[Any]:
        self.records = [record async for record in inputs]
        self.offered.set()
        await self.go.wait()
        for record in self.records:
            yield ComputeParcel(inputs=[record.id])


async def fed(database: Database, plugins: Any, n: int, packer: str) -> Any:
    listed = {"inputs": [{"lfn": f"/lhcb/c/{i:03d}", "lfn_size": 1} for i in range(n)]}
    t = await s.transformation(database, feeder="List", feeder_args=listed, packer=packer)
    await run_feeder(database, plugins, t)
    return t


async def parcels_of(database: Database, transformation_id: bytes) -> int:
    table = execution.parcels
    async with database.transaction(s.RC) as conn:
        return int(
            await conn.scalar(
                sa.select(sa.func.count())
                .select_from(table)
                .where(table.c.TransformationID == transformation_id)
            )
        )


async def hold_rows(
    database: Database, transformation_id: bytes, input_ids: list[bytes], release: asyncio.Event
) -> None:
    """Another transaction holding exactly these rows' locks (by primary key) until
    `release`: an operator's write-off in progress, say."""
    table = execution.inputs
    async with database.transaction(s.RC) as conn:
        await conn.execute(
            sa.select(table.c.InputID)
            .where(table.c.TransformationID == transformation_id, table.c.InputID.in_(input_ids))
            .with_for_update()
        )
        await release.wait()


async def test_two_packer_invocations_for_one_transformation_never_both_run(
    mariadb: Database,
) -> None:
    gate = Gate()
    plugins = s.registry({"packer": {"Gate": gate.packer}})
    t = await fed(mariadb, plugins, 6, "Gate")
    first_locks, second_locks = LockManager(mariadb), LockManager(mariadb)
    try:
        first = asyncio.create_task(pack(mariadb, plugins, first_locks, t))
        await asyncio.wait_for(gate.offered.wait(), GUARD_S)
        second = await pack(mariadb, plugins, second_locks, t)  # a second replica's sweep
        assert not second.ran and second.offered == 0
        gate.go.set()
        result = await asyncio.wait_for(first, GUARD_S)
        assert result.ran and (result.parcels, result.assigned) == (6, 6)
    finally:
        await first_locks.dispose()
        await second_locks.dispose()
    assert s.by_status(await s.input_rows(mariadb, t.id)) == {"Assigned": 6}
    await s.assert_counters_exact(mariadb, t.id)


async def test_rows_another_transaction_holds_are_skipped_not_waited_on(
    mariadb: Database,
) -> None:
    plugins = s.registry({})
    t = await fed(mariadb, plugins, 20, "PerInput")
    rows = await s.input_rows(mariadb, t.id)
    held = [bytes(r.InputID) for r in rows[:5]]
    release = asyncio.Event()
    holder = asyncio.create_task(hold_rows(mariadb, t.id, held, release))
    try:
        await asyncio.sleep(0)  # the holder takes its locks first
        while not await _held(mariadb, t.id, held):  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        result = await asyncio.wait_for(run_packer(mariadb, plugins, t, claim_chunk=7), GUARD_S)
        assert result.error is None and (result.offered, result.assigned) == (15, 15)
        after = {bytes(r.InputID): r for r in await s.input_rows(mariadb, t.id)}
        assert {after[i].Status for i in held} == {"Unassigned"}
        assert all(after[i].LastParcelID is None for i in held)
        assert sum(r.Status == "Assigned" for r in after.values()) == 15
    finally:
        release.set()
        await holder
    again = await run_packer(mariadb, plugins, t)  # the next sweep packs them
    assert (again.offered, again.assigned) == (5, 5)
    assert s.by_status(await s.input_rows(mariadb, t.id)) == {"Assigned": 20}
    assert await parcels_of(mariadb, t.id) == 20
    await s.assert_counters_exact(mariadb, t.id)


async def _held(database: Database, transformation_id: bytes, input_ids: list[bytes]) -> bool:
    """Whether the rows are locked: a SKIP LOCKED read of them comes back empty."""
    table = execution.inputs
    async with database.transaction(s.RC) as conn:
        free = await conn.execute(
            sa.select(table.c.InputID)
            .where(table.c.TransformationID == transformation_id, table.c.InputID.in_(input_ids))
            .with_for_update(skip_locked=True)
        )
        return not free.all()


@pytest.mark.parametrize("how", ["cancel the task", "kill the connection"])
async def test_a_packer_killed_mid_batch_leaves_no_half_written_parcel(
    mariadb: Database, how: str
) -> None:
    gate = Gate()
    plugins = s.registry({"packer": {"Gate": gate.packer}})
    t = await fed(mariadb, plugins, 8, "Gate")
    rows = await s.input_rows(mariadb, t.id)
    running = asyncio.create_task(run_packer(mariadb, plugins, t))
    await asyncio.wait_for(gate.offered.wait(), GUARD_S)
    # After the claim, an operator's transaction takes one of the offered rows: the batch's
    # parcels, facets and links are written, and its Assigned move waits on that row.
    release = asyncio.Event()
    holder = asyncio.create_task(hold_rows(mariadb, t.id, [bytes(rows[5].InputID)], release))
    while not await _held(mariadb, t.id, [bytes(rows[5].InputID)]):  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    gate.go.set()
    assert await s.waiting_on_a_lock(mariadb), "the batch should be waiting on the held row"
    if how == "cancel the task":
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
    else:
        # The batch's connection is lost (a node or proxy failing over looks the same): the
        # batch is replayed whole on a new connection, waits on the held row again, and
        # commits once it is free.
        await _kill_waiting(mariadb)
        assert await s.waiting_on_a_lock(mariadb), "the replayed batch waits on the row again"
        release.set()
        await holder
        result = await asyncio.wait_for(running, GUARD_S)
        assert result.error is None and (result.parcels, result.assigned) == (8, 8)
        assert await parcels_of(mariadb, t.id) == 8
        assert s.by_status(await s.input_rows(mariadb, t.id)) == {"Assigned": 8}
        await s.assert_counters_exact(mariadb, t.id)
        return
    release.set()
    await holder
    assert await parcels_of(mariadb, t.id) == 0
    table = execution.parcel_inputs
    async with mariadb.transaction(s.RC) as conn:
        links = await conn.scalar(
            sa.select(sa.func.count()).select_from(table).where(table.c.TransformationID == t.id)
        )
    assert links == 0
    assert s.by_status(await s.input_rows(mariadb, t.id)) == {"Unassigned": 8}
    await s.assert_counters_exact(mariadb, t.id)
    # Nothing is lost: the next invocation packs everything.
    gate.go.set()
    assert (await run_packer(mariadb, plugins, t)).assigned == 8


async def _kill_waiting(database: Database) -> None:
    async with database.transaction(s.RC) as conn:
        ours = set(
            (
                await conn.execute(
                    sa.text("SELECT ID FROM information_schema.PROCESSLIST WHERE DB = DATABASE()")
                )
            ).scalars()
        )
        waiting = (
            await conn.execute(
                sa.text(
                    "SELECT trx_mysql_thread_id FROM information_schema.INNODB_TRX "
                    "WHERE trx_state = 'LOCK WAIT'"
                )
            )
        ).scalars()
        targets = [thread for thread in waiting if thread in ours]
        assert len(targets) == 1
        await conn.execute(sa.text(f"KILL CONNECTION {int(targets[0])}"))
