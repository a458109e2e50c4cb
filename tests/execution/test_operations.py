"""Operator operations and provenance: reset, write-off, cancellation by ids and by statuses in
bounded batches, provenance of a file across two transformations and of a split parcel — on
SQLite and MariaDB."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from recording_world import (
    World,
    assert_counters_exact,
    definitions,
    empty,
    feed,
    inputs_of,
    outcome,
    pack,
    parcels_of,
    report,
    statuses,
    transformation,
)

from dxts.core.catalogue.local import LocalFileCatalogue
from dxts.core.counters import journal_inputs
from dxts.core.db import Database, Isolation, db_now
from dxts.core.errors import InvalidArgument, NotFound
from dxts.core.ids import id_to_str, input_hash, new_ids
from dxts.core.schema import execution
from dxts.execution.edge.servicer_operations import record_outcome_messages as record_outcomes
from dxts.execution.logic import operations
from dxts.execution.logic.completing import Recorder
from dxts.execution.logic.transformations import ActiveSnapshot
from dxts.v1 import common_pb2

RC = Isolation.READ_COMMITTED
FAILED = common_pb2.OUTCOME_RESULT_FAILED


async def set_status(database: Database, world: World, ids: list[bytes], status: str) -> None:
    """Move inputs by hand (with their journal) to set a scene."""
    async with database.transaction(RC) as conn:
        rows = await conn.execute(
            sa.select(execution.inputs.c.Status).where(execution.inputs.c.InputID.in_(ids))
        )
        olds = [r.Status for r in rows]
        await conn.execute(
            sa.update(execution.inputs)
            .where(execution.inputs.c.InputID.in_(ids))
            .values(Status=status, ErrorCount=4)
        )
        await journal_inputs(conn, [((world.transformation_id, old, status), 1) for old in olds])


async def test_reset_and_write_off_by_ids_and_by_statuses(database: Database, world: World) -> None:
    tid = world.transformation_id
    inputs = await feed(database, world, 8)
    await set_status(database, world, inputs[:3], "Problematic")
    await pack(database, world, [inputs[6:]])  # Assigned: never written off by hand

    # By ids: only the Problematic ones move, ErrorCount back to 0.
    assert await operations.reset_inputs(database, tid, input_ids=inputs[:1] + inputs[3:4]) == 1
    rows = await inputs_of(database, tid)
    assert (rows[inputs[0]].Status, rows[inputs[0]].ErrorCount) == ("Unassigned", 0)
    # By statuses, in batches of one.
    assert await operations.reset_inputs(database, tid, statuses=["Problematic"], batch=1) == 2
    assert await statuses(database, tid) == {"Unassigned": 6, "Assigned": 2}

    await set_status(database, world, inputs[:2], "Failed")
    await set_status(database, world, inputs[2:3], "Problematic")
    written = await operations.write_off_inputs(database, tid, input_ids=[*inputs[:3], inputs[6]])
    assert written == 3
    assert await operations.write_off_inputs(database, tid, statuses=["Unassigned"], batch=2) == 3
    assert await statuses(database, tid) == {"NotProcessed": 6, "Assigned": 2}
    await assert_counters_exact(database)

    with pytest.raises(InvalidArgument, match="applies to Problematic"):
        await operations.reset_inputs(database, tid, statuses=["Failed"])
    with pytest.raises(InvalidArgument, match="write-off applies"):
        await operations.write_off_inputs(database, tid, statuses=["Assigned"])
    with pytest.raises(InvalidArgument, match="exactly one"):
        await operations.write_off_inputs(database, tid, input_ids=inputs, statuses=["Failed"])


async def test_cancel_by_statuses_in_batches(database: Database, world: World) -> None:
    tid = world.transformation_id
    inputs = await feed(database, world, 8)
    waiting = await pack(database, world, [[i] for i in inputs[:3]], status="Unassigned")
    reserved = await pack(database, world, [inputs[3:5]], status="Reserved")
    assigned = await pack(database, world, [inputs[5:7]], status="Assigned")
    (done,) = await pack(database, world, [inputs[7:]])
    await record_outcomes(database, [outcome(done, result=FAILED)])

    cancelled = await operations.cancel_parcels(
        database,
        transformation_id=tid,
        statuses=["Unassigned", "Reserved", "Assigned"],
        reason="halted",
        batch=1,
    )

    assert cancelled == operations.Cancellation(cancelled=3, cancel_requested=2)
    by_id = {bytes(p.ParcelID): p for p in await parcels_of(database, tid)}
    assert {by_id[p].Status for p in waiting} == {"Cancelled"}
    for p in (*reserved, *assigned):
        assert by_id[p].Status == "Completing"
        assert by_id[p].Annotations == {"cancel_requested": True, "cancel_reason": "halted"}
    assert by_id[done].Status == "Failed"
    assert await statuses(database, tid) == {"NotProcessed": 3, "Assigned": 4, "Failed": 1}
    await assert_counters_exact(database)
    # A second cancellation finds nothing left to cancel.
    again = await operations.cancel_parcels(
        database, transformation_id=tid, statuses=["Unassigned", "Reserved", "Assigned"]
    )
    assert again == operations.Cancellation(0, 0)
    # By ids: parcels past Assigned are left as they are.
    assert await operations.cancel_parcels(database, parcel_ids=[done, *assigned]) == (
        operations.Cancellation(0, 0)
    )
    with pytest.raises(InvalidArgument, match="a cancellation applies"):
        await operations.cancel_parcels(database, transformation_id=tid, statuses=["Done"])


async def test_provenance_follows_files_upstream(
    database: Database, catalogue: LocalFileCatalogue
) -> None:
    await empty(database)
    first, second = await transformation(database), await transformation(database)
    (raw,) = await feed(database, first, 1, prefix="/lhcb/raw")
    (p1,) = await pack(database, first, [[raw]])
    reco, merged = f"/lhcb/o/{p1.hex()}/reco.dst", f"/lhcb/o/{p1.hex()}/merged.dst"
    fates = report(**{id_to_str(raw): "SUCCESS"})
    await record_outcomes(database, [outcome(p1, report=fates, files=[("out", reco)])])
    # The second transformation consumes the first's output as its input.
    (consumed,) = await _feed_lfn(database, second, reco)
    (p2,) = await pack(database, second, [[consumed]])
    fates = report(**{id_to_str(consumed): "SUCCESS"})
    await record_outcomes(database, [outcome(p2, report=fates, files=[("out", merged)])])
    await Recorder(
        database, catalogue, ActiveSnapshot(definitions(first, second))
    ).record_completing()

    records = await operations.provenance(database, merged)

    assert [(r.parcel.parcel_id, r.output.lfn, r.depth) for r in records] == [
        (p2, merged, 1),
        (p1, reco, 2),
    ]
    assert [i.lfn for i in records[1].inputs] == [f"/lhcb/raw/{raw.hex()}.dst"]
    assert records[0].output.name == "out"
    assert records[0].parcel.process_id is not None
    assert len(await operations.provenance(database, merged, max_depth=1)) == 1
    with pytest.raises(NotFound):
        await operations.provenance(database, "/lhcb/o/nowhere")


async def test_parcel_provenance_names_its_recovery_children(
    database: Database, world: World, catalogue: LocalFileCatalogue
) -> None:
    inputs = await feed(database, world, 2)
    (p,) = await pack(database, world, [inputs])
    split = {"action": "SPLIT", "SUCCESS": [{"descriptor": {"half": 1}}]}
    fates = report(**{id_to_str(inputs[0]): "SUCCESS", id_to_str(inputs[1]): split})
    await record_outcomes(
        database, [outcome(p, report=fates, files=[("out", f"/lhcb/o/{p.hex()}")])]
    )
    await Recorder(database, catalogue, ActiveSnapshot(definitions(world))).record_completing()

    found = await operations.parcel_provenance(database, p)

    assert sorted(i.input_id for i in found.inputs) == sorted(inputs)
    assert [o.lfn for o in found.outputs] == [f"/lhcb/o/{p.hex()}"]
    (child,) = found.recovery_children
    assert (child.descriptor, child.parent_input_id, child.status) == (
        {"half": 1},
        inputs[1],
        "Processed",
    )
    with pytest.raises(NotFound):
        await operations.parcel_provenance(database, new_ids(1)[0])


async def _feed_lfn(database: Database, world: World, lfn: str) -> list[bytes]:
    ids = new_ids(1)
    async with database.transaction(RC) as conn:
        await conn.execute(
            sa.insert(execution.inputs).values(
                TransformationID=world.transformation_id,
                InputID=ids[0],
                InputHash=input_hash(lfn, None),
                LFN=lfn,
                LFNSize=10,
                Status="Unassigned",
                UpdatedAt=await db_now(conn),
            )
        )
        await journal_inputs(conn, {(world.transformation_id, None, "Unassigned"): 1})
    return ids
