"""MariaDB only: feeders racing on one transformation insert each input once and journal exactly
the rows they inserted."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
import runner_support as s

from dxts.core.bulk import insert_rows
from dxts.core.counters import journal_input_transition
from dxts.core.db import Database, db_now
from dxts.core.ids import input_hash, new_ids
from dxts.core.plugins import FileInput, PluginArgs
from dxts.core.schema import execution
from dxts.execution.logic.feeding import run_feeder

pytestmark = pytest.mark.mariadb_only


class RangeArgs(PluginArgs):
    start: int
    stop: int


def ranged(*, feeder_args: RangeArgs) -> Iterator[Any]:
    for i in range(feeder_args.start, feeder_args.stop):
        yield FileInput(lfn=f"/lhcb/race/{i:05d}", lfn_size=i)


async def test_two_feeders_with_overlapping_inputs_insert_each_once(mariadb: Database) -> None:
    plugins = s.registry({"feeder": {"Range": ranged}})
    t = await s.transformation(mariadb, feeder="Range", feeder_args={"start": 0, "stop": 3000})
    other = replace(t, feeder_args={"start": 1500, "stop": 4500})
    first, second = await asyncio.gather(
        run_feeder(mariadb, plugins, t, batch=250), run_feeder(mariadb, plugins, other, batch=250)
    )
    assert first.error is None and second.error is None
    assert (first.yielded, second.yielded) == (3000, 3000)
    assert first.inserted + second.inserted == 4500
    assert first.inserted >= 1500 and second.inserted >= 1500  # each had inputs of its own
    rows = await s.input_rows(mariadb, t.id)
    assert sorted(r.LFN for r in rows) == [f"/lhcb/race/{i:05d}" for i in range(4500)]
    assert await s.counted(mariadb, t.id) == {("Input", "Unassigned"): 4500}
    await s.assert_counters_exact(mariadb, t.id)


async def test_an_insert_waiting_on_a_concurrent_duplicate_counts_only_its_own_rows(
    mariadb: Database,
) -> None:
    """Two transactions insert overlapping rows at once: the second waits on the first's
    uncommitted keys, and once the first commits its row count leaves the duplicates out."""
    t = await s.transformation(mariadb, feeder=None)

    def rows(start: int, stop: int) -> list[dict[str, Any]]:
        return [
            {
                "TransformationID": t.id,
                "InputID": input_id,
                "InputHash": input_hash(f"/lhcb/w/{i}", None),
                "LFN": f"/lhcb/w/{i}",
                "LFNSize": 1,
                "Status": "Unassigned",
                "UpdatedAt": now,
            }
            for input_id, i in zip(new_ids(stop - start), range(start, stop), strict=True)
        ]

    first_inserted = asyncio.Event()
    release_first = asyncio.Event()

    async def first() -> int:
        async with mariadb.transaction(s.RC) as conn:
            inserted = await insert_rows(
                conn, execution.inputs, rows(0, 100), ignore_duplicates=True
            )
            await journal_input_transition(conn, t.id, None, "Unassigned", inserted)
            first_inserted.set()
            await release_first.wait()
            return inserted

    async def second() -> int:
        await first_inserted.wait()
        async with mariadb.transaction(s.RC) as conn:
            inserted = await insert_rows(
                conn, execution.inputs, rows(50, 150), ignore_duplicates=True
            )
            await journal_input_transition(conn, t.id, None, "Unassigned", inserted)
            return inserted

    async with mariadb.transaction(s.RC) as conn:
        now = await db_now(conn)
    one = asyncio.create_task(first())
    two = asyncio.create_task(second())
    await first_inserted.wait()
    assert await s.waiting_on_a_lock(mariadb), "the second insert should wait on the first's keys"
    release_first.set()
    assert (await one, await two) == (100, 50)
    assert len(await s.input_rows(mariadb, t.id)) == 150
    await s.assert_counters_exact(mariadb, t.id)
