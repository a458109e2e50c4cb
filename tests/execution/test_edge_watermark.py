"""MariaDB only: the Edge feeder's commit-safe watermark under recorders racing it.

Several recorders, each on its own connection, write a producer's outputs the way outcome
recording does (the output held shared, OutputIDs minted after what is committed) in interleaved
order: some hold their transaction open between minting and inserting and between inserting and
committing, some roll back. A feeder runs again and again meanwhile. Every committed output is
fed exactly once (yielded once in all, one input each) and nothing rolled back is fed. And the
watermark holds at REPEATABLE READ too: its reads are locking reads, never an old snapshot.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from typing import Any
from uuid import UUID

import pytest
import runner_support as s
import sqlalchemy as sa
from definition_double import InMemoryTransformations

from dxts.core.catalogue import CatalogueSettings
from dxts.core.catalogue.local import LocalFileCatalogue
from dxts.core.counters import journal_parcels
from dxts.core.db import Database, Isolation, db_now
from dxts.core.ids import mint_after, new_id, new_ids
from dxts.core.plugins import Registry
from dxts.core.schema import execution
from dxts.execution.component import install_providers
from dxts.execution.logic.feeding import run_feeder
from dxts.execution.logic.transformations import ActiveSnapshot
from dxts.execution.store import watermark

pytestmark = pytest.mark.mariadb_only

RECORDERS = 6
PARCELS_EACH = 25
FILES_EACH = 3


class RolledBack(Exception):
    """Raised inside a recorder's transaction to roll it back."""


@pytest.fixture
async def edge(mariadb: Database, tmp_path: Any) -> AsyncIterator[tuple[Registry, Any, Any]]:
    """The built-ins wired to MariaDB, a producer with one output and its Edge consumer."""
    definitions = InMemoryTransformations()
    catalogue = LocalFileCatalogue(
        CatalogueSettings(url=f"sqlite+aiosqlite:///{tmp_path / 'catalogue.sqlite'}")
    )
    await catalogue.start()
    registry = s.builtins()
    install_providers(
        registry.providers,
        mariadb,
        ActiveSnapshot(definitions, max_age_s=0),
        catalogue,
        watermark_interval_s=0,
    )
    producer = await s.transformation(mariadb, feeder="Seeds", outputs=["out"])
    definitions.put(producer)
    async with mariadb.transaction(s.RC) as conn:  # as the packer's round does first
        await watermark.create_lock_rows(conn, [producer.outputs[0].output_id])
    args = {
        "transformation_output_id": str(UUID(bytes=producer.outputs[0].output_id)),
        "page_size": 7,
    }
    consumer = await s.transformation(mariadb, feeder="Edge", feeder_args=args)
    try:
        yield registry, producer, consumer
    finally:
        await catalogue.close()


async def record(
    database: Database, producer: Any, name: str, rng: random.Random, *, rolled_back: bool = True
) -> list[str] | None:
    """One parcel's outputs written as the recorder writes them, with pauses where a slow
    transaction would have them; returns the LFNs committed (None: rolled back)."""
    output_id = producer.outputs[0].output_id
    lfns = [f"/lhcb/wm/{name}/{i}" for i in range(FILES_EACH)]
    parcel_id = new_id()
    try:
        async with database.transaction(s.RC) as conn:
            now = await db_now(conn)
            await conn.execute(
                sa.insert(execution.parcels).values(
                    ParcelID=parcel_id,
                    TransformationID=producer.id,
                    Kind="Compute",
                    Status="Done",
                    UpdatedAt=now,
                    CompletedAt=now,
                )
            )
            floor = await watermark.hold_outputs(conn, [output_id])
            if floor is not None:
                mint_after(floor)
            ids = new_ids(len(lfns))
            await asyncio.sleep(rng.choice((0, 0.01, 0.1, 0.3)))  # minted, not written
            await conn.execute(
                sa.insert(execution.parcel_outputs),
                [
                    {
                        "TransformationOutputID": output_id,
                        "OutputID": oid,
                        "ParcelID": parcel_id,
                        "LFN": lfn,
                        "LFNSize": 1,
                    }
                    for oid, lfn in zip(ids, lfns, strict=True)
                ],
            )
            await asyncio.sleep(rng.choice((0, 0.01, 0.1)))  # written, not committed
            if rolled_back and rng.random() < 0.2:
                raise RolledBack
            await journal_parcels(conn, {(producer.id, None, "Done"): 1})
    except RolledBack:
        return None
    return lfns


async def test_every_committed_output_is_fed_exactly_once_under_racing_recorders(
    mariadb: Database, edge: tuple[Registry, Any, Any]
) -> None:
    registry, producer, consumer = edge
    committed: list[str] = []
    rolled_back = 0

    async def recorder(n: int) -> None:
        nonlocal rolled_back
        rng = random.Random(n)
        for k in range(PARCELS_EACH):
            lfns = await record(mariadb, producer, f"{n}-{k}", rng)
            if lfns is None:
                rolled_back += 1
            else:
                committed.extend(lfns)

    recorders = asyncio.gather(*(recorder(n) for n in range(RECORDERS)))
    yielded = runs = 0

    async def feed_once() -> None:
        nonlocal yielded, runs, consumer
        result = await run_feeder(mariadb, registry, consumer)
        assert result.error is None, result.error
        yielded += result.yielded
        runs += 1

    while not recorders.done():
        await feed_once()
        await asyncio.sleep(0)
    await recorders
    await feed_once()  # after the last commit: what is left

    assert rolled_back > 0 and len(committed) > 0  # the race had both kinds
    fed = [r.LFN for r in await s.input_rows(mariadb, consumer.id)]
    assert sorted(fed) == sorted(committed)  # none lost, none of the rolled back
    assert yielded == len(committed)  # none yielded twice across the runs
    assert runs > 2
    await s.assert_counters_exact(mariadb, consumer.id)


async def test_the_watermark_reads_the_latest_commit_even_in_an_older_snapshot(
    mariadb: Database, edge: tuple[Registry, Any, Any]
) -> None:
    """At REPEATABLE READ, a transaction whose snapshot predates a recording's commit still
    takes that commit into its watermark: the reads are locking reads, which see the latest."""
    _, producer, _ = edge
    output_id = producer.outputs[0].output_id
    async with mariadb.transaction(Isolation.REPEATABLE_READ) as conn:
        before = await conn.scalar(sa.select(sa.func.count()).select_from(execution.parcels))
        lfns = await record(mariadb, producer, "late", random.Random(0), rolled_back=False)
        assert lfns is not None
        snapshot = await conn.scalar(sa.select(sa.func.count()).select_from(execution.parcels))
        assert snapshot == before  # the snapshot does not see the commit...
        through = await watermark.settled_through(conn, output_id)
    async with mariadb.transaction(s.RC) as conn:
        newest = await conn.scalar(
            sa.select(sa.func.max(execution.parcel_outputs.c.OutputID)).where(
                execution.parcel_outputs.c.TransformationOutputID == output_id
            )
        )
    assert through is not None and bytes(through) == bytes(newest)  # ...the watermark does
