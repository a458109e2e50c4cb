"""Cleaning a transformation's bulk rows: split lineages deeper than InnoDB's cascade limit,
every table hanging off a parcel, the counter scope — and nothing of another transformation —
on SQLite and MariaDB."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from recording_world import (
    World,
    assert_counters_exact,
    definitions,
    empty,
    feed,
    outcome,
    pack,
    report,
    transformation,
)

from dxts.core.catalogue.local import LocalFileCatalogue
from dxts.core.counters import DATA_PARCELS, TRANSFORMATION, StorageDelta, journal_inputs
from dxts.core.db import Database, Isolation, db_now
from dxts.core.errors import FailedPrecondition
from dxts.core.ids import id_to_str, input_hash, new_id
from dxts.core.logs import LogEntry, log_transformations
from dxts.core.schema import accounting, definition, execution
from dxts.execution.edge.servicer_operations import record_outcome_messages as record_outcomes
from dxts.execution.logic.cleaning import Cleaned, CleanMode, check_mode, clean_transformation
from dxts.execution.logic.completing import Recorder
from dxts.execution.logic.operations import cancel_parcels
from dxts.execution.logic.transformations import ActiveSnapshot
from dxts.execution.store.cleaning import parcel_dependents

RC = Isolation.READ_COMMITTED
DEPTH = 20  # InnoDB cascades 15 levels at most


async def lineage(database: Database, world: World, depth: int) -> list[bytes]:
    """A chain of splits `depth` deep: every input but the last is Split, the last Unassigned."""
    ids = [new_id() for _ in range(depth)]

    async def work(conn: Any) -> None:
        now = await db_now(conn)
        for level, input_id in enumerate(ids):
            await conn.execute(
                sa.insert(execution.inputs).values(
                    TransformationID=world.transformation_id,
                    InputID=input_id,
                    ParentInputID=ids[level - 1] if level else None,
                    InputHash=input_hash(None, {"level": level, "of": id_to_str(ids[0])}),
                    Descriptor={"level": level, "of": id_to_str(ids[0])},
                    Status="Split" if level < depth - 1 else "Unassigned",
                    UpdatedAt=now,
                )
            )
        await journal_inputs(
            conn,
            {
                (world.transformation_id, None, "Split"): depth - 1,
                (world.transformation_id, None, "Unassigned"): 1,
            },
        )

    await database.run(work, isolation=RC)
    return ids


async def populate(database: Database, world: World, catalogue: LocalFileCatalogue) -> None:
    """Inputs, parcels of every kind of row: outputs, a recovery split, identifiers, a lineage."""
    inputs = await feed(database, world, 6)
    ok, split = await pack(database, world, [inputs[:2], inputs[2:4]])
    child = {"action": "SPLIT", "SUCCESS": [{"descriptor": {"part": id_to_str(split)}}]}
    fates = [
        report(**{id_to_str(i): "SUCCESS" for i in inputs[:2]}),
        report(**{id_to_str(inputs[2]): child, id_to_str(inputs[3]): "FAILURE"}),
    ]
    await record_outcomes(
        database,
        [
            outcome(p, report=f, files=[("out", f"/lhcb/o/{p.hex()}")])
            for p, f in zip((ok, split), fates, strict=True)
        ],
    )
    await Recorder(database, catalogue, ActiveSnapshot(definitions(world))).record_completing()
    async with database.transaction(RC) as conn:
        await conn.execute(
            sa.insert(execution.backend_ids),
            [{"ParcelID": p, "Adaptor": "null", "Identifier": new_id()} for p in (ok, split)],
        )
        await log_transformations(
            conn, [LogEntry(world.transformation_id, "Comment", "test", message="kept")]
        )
    (cancelled,) = await pack(database, world, [inputs[4:]], status="Unassigned")
    await cancel_parcels(database, parcel_ids=[cancelled])
    await lineage(database, world, DEPTH)


async def rows_of(database: Database, world: World) -> dict[str, int]:
    """How many rows of each table belong to the transformation."""
    tid = world.transformation_id
    found = {}
    async with database.transaction(RC) as conn:
        parcel_ids = sa.select(execution.parcels.c.ParcelID).where(
            execution.parcels.c.TransformationID == tid
        )
        for table in parcel_dependents():
            found[table.name] = await conn.scalar(
                sa.select(sa.func.count())
                .select_from(table)
                .where(table.c.ParcelID.in_(parcel_ids))
            )
        for table in (execution.inputs, execution.parcels):
            found[table.name] = await conn.scalar(
                sa.select(sa.func.count()).select_from(table).where(table.c.TransformationID == tid)
            )
        for counter in (TRANSFORMATION, DATA_PARCELS):
            for table in (counter.counters_table, counter.journal_table):
                found[table.name] = await conn.scalar(
                    sa.select(sa.func.count())
                    .select_from(table)
                    .where(table.c.TransformationID == tid)
                )
        for table in (
            definition.transformations,
            definition.transformation_outputs,
            accounting.transformation_log,
        ):
            found[table.name] = await conn.scalar(
                sa.select(sa.func.count()).select_from(table).where(table.c.TransformationID == tid)
            )
    return found


async def test_cleaning_removes_exactly_the_transformations_bulk_rows(
    database: Database, catalogue: LocalFileCatalogue
) -> None:
    await empty(database)
    doomed, kept = await transformation(database), await transformation(database)
    data = await transformation(database, outputs=(), kind="Data")
    for world in (doomed, kept):
        await populate(database, world, catalogue)
    await pack(
        database,
        data,
        [await feed(database, data, 2)],
        status="Unassigned",
        deltas={"CERN-TAPE": StorageDelta(2, 20, 0, 0)},
    )
    await assert_counters_exact(database)
    await TRANSFORMATION.fold(database, batch=10_000)  # counter rows as well as journal rows
    before = await rows_of(database, doomed)
    untouched = await rows_of(database, kept)
    assert before["Inputs"] == 6 + 1 + DEPTH  # fed, one recovery child, the lineage
    assert min(before[n] for n in ("ParcelInputs", "ParcelOutputs", "ComputeParcels", "BackendIDs"))
    assert before["TransformationCounters"] > 0

    # Small calls: each reports that work is left, until the last.
    calls = 0
    while True:
        step = await clean_transformation(database, doomed.transformation_id, max_rows=7, batch=3)
        calls += 1
        if step.complete:
            break
        assert step.rows_deleted >= 7
    assert calls >= 3

    after = await rows_of(database, doomed)
    stay = ("Transformations", "TransformationOutputs", "TransformationLog")
    assert {n: c for n, c in after.items() if n not in stay} == {
        n: 0 for n in after if n not in stay
    }
    assert after["Transformations"] == 1
    assert after["TransformationLog"] == before["TransformationLog"] > 0
    assert await rows_of(database, kept) == untouched
    await assert_counters_exact(database)
    # Again: nothing left, still complete.
    assert await clean_transformation(database, doomed.transformation_id) == Cleaned(
        0, complete=True
    )
    # The data transformation's storage counters were not touched either.
    async with database.transaction(RC) as conn:
        reading = await DATA_PARCELS.read(conn, {"TransformationID": data.transformation_id})
    assert reading[(data.transformation_id, "Unassigned", "CERN-TAPE")]["LFNCountAdded"] == 2


@pytest.mark.mariadb_only
async def test_innodb_would_refuse_the_cascade(mariadb: Database) -> None:
    """Why cleaning goes bottom-up: deleting the root of a deep lineage fails on InnoDB (error
    193, HA_ERR_FK_DEPTH_EXCEEDED)."""
    await empty(mariadb)
    world = await transformation(mariadb)
    root, *_ = await lineage(mariadb, world, DEPTH)
    with pytest.raises(sa.exc.DBAPIError, match=r"Got error 193 "):
        async with mariadb.transaction(RC) as conn:
            await conn.execute(
                sa.delete(execution.inputs).where(execution.inputs.c.InputID == root)
            )
    assert (await clean_transformation(mariadb, world.transformation_id)).complete


async def test_cleaning_refuses_live_parcels_and_the_wrong_state(database: Database) -> None:
    await empty(database)
    world = await transformation(database)
    await pack(database, world, [await feed(database, world, 1)])

    with pytest.raises(FailedPrecondition, match="in flight"):
        await clean_transformation(database, world.transformation_id)
    check_mode(CleanMode.ARCHIVE, "Archiving", world.transformation_id)
    check_mode(CleanMode.CLEAN, "CancellingBlocked", world.transformation_id)
    with pytest.raises(FailedPrecondition, match="Cancelling"):
        check_mode(CleanMode.CLEAN, "Active", world.transformation_id)
    with pytest.raises(FailedPrecondition, match="Archiving"):
        check_mode(CleanMode.ARCHIVE, "Cancelling", world.transformation_id)
