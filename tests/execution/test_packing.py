"""The packer runner on SQLite and MariaDB: parcels and their rows, decisions, refusals, races."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

import pytest
import runner_support as s
import sqlalchemy as sa
from prometheus_client import REGISTRY

from dxts.core.db import Database, db_now
from dxts.core.ids import content_hash
from dxts.core.plugins import (
    BadInput,
    ComputeParcel,
    DataParcel,
    DelayInput,
    InputRecord,
    StorageDelta,
)
from dxts.core.policy import Policy
from dxts.core.schema import definition, execution
from dxts.core.states import InputStatus, Kind
from dxts.execution.logic.feeding import run_feeder
from dxts.execution.logic.packing import _Offer, run_packer
from dxts.execution.store import packing as packing_db

RC = s.RC


def failures(packer: str) -> float:
    value = REGISTRY.get_sample_value(
        "dxts_execution_plugin_failures_total", {"point": "Packer", "plugin": packer}
    )
    return value or 0.0


def files(n: int, prefix: str = "/lhcb/p", **descriptor: Any) -> dict[str, Any]:
    return {
        "inputs": [
            {"lfn": f"{prefix}{i:04d}", "lfn_size": 100 + i, "descriptor": descriptor or None}
            for i in range(n)
        ]
    }


SEEN: dict[str, Any] = {}


async def spy(
    *,
    inputs: AsyncIterator[InputRecord],
    flush: bool,
    feeder_active: bool,
    input_overview: dict[InputStatus, int],
) -> AsyncIterator[Any]:
    """Packs nothing; remembers what it was given."""
    SEEN.update(flush=flush, feeder_active=feeder_active, overview=dict(input_overview))
    SEEN["inputs"] = [record async for record in inputs]
    return
    yield


async def deciding(*, inputs: AsyncIterator[InputRecord]) -> AsyncIterator[Any]:
    """Input 0 bad, 1 delayed, 2+3 one parcel with extra requirements, the rest untouched."""
    records = [record async for record in inputs]
    yield BadInput(records[0].id, "no such run in the conditions database")
    yield DelayInput([records[1].id], datetime.now(UTC) + timedelta(hours=1))
    yield ComputeParcel(
        inputs=[records[2].id, records[3].id],
        requirements={"memory_mb": 4000},
        parameters={"input-data": [records[2].lfn, records[3].lfn]},
        metadata={"group": "g1"},
    )


async def data_parcels(*, inputs: AsyncIterator[InputRecord]) -> AsyncIterator[Any]:
    async for record in inputs:
        yield DataParcel(
            inputs=[record.id],
            request={"Operations": []},
            deltas=[
                StorageDelta("CERN-DST", 1, record.lfn_size or 0),
                StorageDelta("BUFFER", -1, -5),
            ],
        )


async def unoffered(*, inputs: AsyncIterator[InputRecord]) -> AsyncIterator[Any]:
    records = [record async for record in inputs]
    yield ComputeParcel(inputs=[records[0].id])
    yield ComputeParcel(inputs=[uuid4()])


async def twice(*, inputs: AsyncIterator[InputRecord]) -> AsyncIterator[Any]:
    records = [record async for record in inputs]
    yield ComputeParcel(inputs=[records[0].id])
    yield BadInput(records[0].id)


async def wrong_kind(*, inputs: AsyncIterator[InputRecord]) -> AsyncIterator[Any]:
    async for record in inputs:
        yield DataParcel(inputs=[record.id], request={})


async def mixed_requirements(*, inputs: AsyncIterator[InputRecord]) -> AsyncIterator[Any]:
    """Parcel by parcel: none added, the same addition spelled in two key orders, another one,
    none again."""
    additions = [
        None,
        {"memory_mb": 4000, "sites": ["CERN"]},
        {"sites": ["CERN"], "memory_mb": 4000},
        {"memory_mb": 8000},
        {},
    ]
    records = [record async for record in inputs]
    for record, added in zip(records, additions, strict=True):
        yield ComputeParcel(inputs=[record.id], requirements=added)


async def greedy(*, inputs: AsyncIterator[InputRecord]) -> AsyncIterator[Any]:
    """Parcel by parcel: memory over a lowering cap, cores over a refusing one, a partition off
    the allow-list, nothing added."""
    additions = [{"memory_mb": 64000}, {"cores": 64}, {"partition": "admin-only"}, None]
    records = [record async for record in inputs]
    for record, added in zip(records, additions, strict=True):
        yield ComputeParcel(inputs=[record.id], requirements=added)


async def raising(*, inputs: AsyncIterator[InputRecord]) -> AsyncIterator[Any]:
    async for record in inputs:
        yield ComputeParcel(inputs=[record.id])
    raise RuntimeError("lost the bookkeeping connection")


def write_off_one(database: Database) -> Any:
    """A packer during which an operator writes one offered input off."""

    async def packer(*, inputs: AsyncIterator[InputRecord]) -> AsyncIterator[Any]:
        records = [record async for record in inputs]
        table = execution.inputs
        async with database.transaction(RC) as conn:
            await conn.execute(
                sa.update(table)
                .where(table.c.InputID == records[1].id.bytes)
                .values(Status="NotProcessed")
            )
        yield ComputeParcel(inputs=[r.id for r in records])

    return packer


@pytest.fixture(scope="module")
def plugins(database: Database) -> Any:
    return s.registry(
        {
            "packer": {
                "Spy": spy,
                "Deciding": deciding,
                "DataParcels": data_parcels,
                "Unoffered": unoffered,
                "Twice": twice,
                "WrongKind": wrong_kind,
                "Raising": raising,
                "MixedRequirements": mixed_requirements,
                "Greedy": greedy,
                "WriteOffOne": write_off_one(database),
            }
        }
    )


async def fed(database: Database, plugins: Any, n: int, **options: Any) -> Any:
    t = await s.transformation(database, feeder="List", feeder_args=files(n), **options)
    assert (await run_feeder(database, plugins, t)).inserted == n
    return t


async def parcel_rows(database: Database, transformation_id: bytes) -> list[Any]:
    parcels, compute = execution.parcels, execution.compute_parcels
    async with database.transaction(RC) as conn:
        return list(
            await conn.execute(
                sa.select(
                    parcels, compute.c.ProcessID, compute.c.RequirementsID, compute.c.Parameters
                )
                .select_from(parcels.outerjoin(compute, compute.c.ParcelID == parcels.c.ParcelID))
                .where(parcels.c.TransformationID == transformation_id)
                .order_by(parcels.c.ParcelID)
            )
        )


async def links(database: Database, transformation_id: bytes) -> dict[bytes, set[bytes]]:
    table = execution.parcel_inputs
    async with database.transaction(RC) as conn:
        rows = await conn.execute(
            sa.select(table.c.ParcelID, table.c.InputID).where(
                table.c.TransformationID == transformation_id
            )
        )
        found: dict[bytes, set[bytes]] = {}
        for parcel_id, input_id in rows:
            found.setdefault(bytes(parcel_id), set()).add(bytes(input_id))
    return found


async def test_per_input_makes_one_compute_parcel_per_input(
    database: Database, plugins: Any
) -> None:
    t = await fed(
        database, plugins, 5, packer="PerInput", annotations={"driving_input": "input-data"}
    )
    result = await run_packer(database, plugins, t, claim_chunk=2, batch=3)
    assert (result.offered, result.parcels, result.assigned, result.batches) == (5, 5, 5, 2)
    rows = await s.input_rows(database, t.id)
    assert s.by_status(rows) == {"Assigned": 5}
    parcels = await parcel_rows(database, t.id)
    assert {p.Status for p in parcels} == {"Unassigned"} and {p.Kind for p in parcels} == {
        "Compute"
    }
    assert {p.ProcessID for p in parcels} == {t.process_id}
    assert {p.RequirementsID for p in parcels} == {content_hash(s.TEMPLATE)}
    by_parcel = await links(database, t.id)
    assert {row.LastParcelID: {row.InputID} for row in rows} == by_parcel
    carried = {bytes(row.LastParcelID): row for row in rows}
    for parcel in parcels:
        row = carried[bytes(parcel.ParcelID)]
        file = {"class": "File", "location": f"lfn:{row.LFN}", "size": row.LFNSize}
        assert parcel.Parameters == {"input-data": [file]}
    assert await s.counted(database, t.id) == {
        ("Input", "Assigned"): 5,
        ("Parcel", "Unassigned"): 5,
    }
    await s.assert_counters_exact(database, t.id)
    again = await run_packer(database, plugins, t)
    assert (again.offered, again.parcels) == (0, 0)


async def test_grouping_holds_back_while_the_feeder_is_active(
    database: Database, plugins: Any
) -> None:
    t = await fed(database, plugins, 7, packer="BySize", packer_args={"group_size": 3})
    active = replace(t, feeder_enabled=True)
    held = await run_packer(database, plugins, active)
    assert (held.offered, held.parcels, held.assigned) == (7, 2, 6)
    assert sorted(len(v) for v in (await links(database, t.id)).values()) == [3, 3]
    flushed = await run_packer(database, plugins, active, flush=True)
    assert (flushed.offered, flushed.parcels, flushed.assigned) == (1, 1, 1)
    await s.assert_counters_exact(database, t.id)

    off = await fed(database, plugins, 4, packer="BySize", packer_args={"group_size": 3})
    result = await run_packer(database, plugins, replace(off, feeder_enabled=False))
    assert (result.parcels, result.assigned) == (2, 4)


async def test_the_packer_is_told_the_pool_and_the_flags(database: Database, plugins: Any) -> None:
    t = await fed(database, plugins, 3, packer="Spy")
    await run_packer(database, plugins, t, flush=True)
    assert SEEN["flush"] is True and SEEN["feeder_active"] is True
    assert SEEN["overview"] == {**dict.fromkeys(InputStatus, 0), InputStatus.UNASSIGNED: 3}
    assert [r.lfn for r in SEEN["inputs"]] == ["/lhcb/p0000", "/lhcb/p0001", "/lhcb/p0002"]


async def test_bad_delayed_and_merged_requirements(database: Database, plugins: Any) -> None:
    t = await fed(database, plugins, 5, packer="Deciding")
    result = await run_packer(database, plugins, t)
    assert (result.parcels, result.assigned, result.problematic, result.delayed) == (1, 2, 1, 1)
    rows = await s.input_rows(database, t.id)
    assert [r.Status for r in rows] == [
        "Problematic",
        "Unassigned",
        "Assigned",
        "Assigned",
        "Unassigned",
    ]
    assert rows[1].DelayedUntil is not None and rows[4].DelayedUntil is None
    (parcel,) = await parcel_rows(database, t.id)
    merged = {**s.TEMPLATE, "memory_mb": 4000}
    assert parcel.RequirementsID == content_hash(merged)
    assert parcel.Annotations == {"metadata": {"group": "g1"}}
    async with database.transaction(RC) as conn:
        stored = await conn.scalar(
            sa.select(definition.requirements.c.Requirements).where(
                definition.requirements.c.RequirementsID == content_hash(merged)
            )
        )
    assert stored == merged
    logged = [r for r in await s.log_rows(database, t.id) if r.EventType == "InputProblematic"]
    assert [(r.Message, r.Data["input_id"]) for r in logged] == [
        ("no such run in the conditions database", str(UUID(bytes=rows[0].InputID)))
    ]
    await s.assert_counters_exact(database, t.id)
    # The delayed input is not offered again until its time has passed.
    again = await run_packer(database, plugins, replace(t, packer="Spy"))
    assert [r.lfn for r in SEEN["inputs"]] == [rows[4].LFN] and again.offered == 1


@pytest.mark.parametrize("template", [s.TEMPLATE, None])
async def test_parcels_adding_the_same_requirements_share_one_merged_set(
    database: Database, plugins: Any, template: dict[str, Any] | None
) -> None:
    t = await fed(database, plugins, 5, packer="MixedRequirements", template=template)
    assert (await run_packer(database, plugins, t)).parcels == 5
    expected = [
        template,
        {**(template or {}), "memory_mb": 4000, "sites": ["CERN"]},
        {**(template or {}), "memory_mb": 4000, "sites": ["CERN"]},
        {**(template or {}), "memory_mb": 8000},
        template,
    ]
    parcels = await parcel_rows(database, t.id)
    assert [p.RequirementsID for p in parcels] == [content_hash(e) if e else None for e in expected]
    table = definition.requirements
    async with database.transaction(RC) as conn:
        stored = dict(
            (bytes(key), value)
            for key, value in await conn.execute(
                sa.select(table.c.RequirementsID, table.c.Requirements).where(
                    table.c.RequirementsID.in_([content_hash(e) for e in expected if e])
                )
            )
        )
    assert stored == {content_hash(e): e for e in expected if e}


async def test_data_parcels_write_requests_deltas_and_the_data_counter(
    database: Database, plugins: Any
) -> None:
    t = await fed(database, plugins, 2, packer="DataParcels", kind=Kind.DATA)
    result = await run_packer(database, plugins, t)
    assert (result.parcels, result.assigned) == (2, 2)
    deltas, data = execution.data_parcel_deltas, execution.data_parcels
    mine_ids = list(await links(database, t.id))
    async with database.transaction(RC) as conn:
        mine = list(await conn.execute(sa.select(deltas).where(deltas.c.ParcelID.in_(mine_ids))))
        requests = list(
            await conn.execute(sa.select(data.c.Request).where(data.c.ParcelID.in_(mine_ids)))
        )
        compute = await conn.scalar(
            sa.select(sa.func.count())
            .select_from(execution.compute_parcels)
            .where(execution.compute_parcels.c.ParcelID.in_(mine_ids))
        )
    assert {
        (r.StorageElement, r.FilesAdded, r.BytesAdded, r.FilesFreed, r.BytesFreed) for r in mine
    } == {
        ("BUFFER", 0, 0, 1, 5),
        ("CERN-DST", 1, 100, 0, 0),
        ("CERN-DST", 1, 101, 0, 0),
    }
    assert [r.Request for r in requests] == [{"Operations": []}] * 2 and compute == 0
    counted = await s.data_counted(database, t.id)
    assert counted[("Unassigned", "CERN-DST")] == {
        "LFNCountAdded": 2,
        "LFNSizeAdded": 201,
        "LFNCountFreed": 0,
        "LFNSizeFreed": 0,
    }
    assert counted[("Unassigned", "BUFFER")] == {
        "LFNCountAdded": 0,
        "LFNSizeAdded": 0,
        "LFNCountFreed": 2,
        "LFNSizeFreed": 10,
    }
    await s.assert_counters_exact(database, t.id)


@pytest.mark.parametrize(
    ("packer", "fragment"),
    [
        ("Unoffered", "is not an input of this transformation"),
        ("Twice", "was already proposed in this invocation"),
        ("WrongKind", "parcels are not Data"),
        ("Raising", "lost the bookkeeping connection"),
    ],
)
async def test_refused_proposals_and_failures_write_nothing(
    database: Database, plugins: Any, packer: str, fragment: str
) -> None:
    t = await fed(database, plugins, 3, packer=packer)
    before = failures(packer)
    result = await run_packer(database, plugins, t)
    assert result.error is not None and fragment in result.error, result.error
    assert result.parcels == 0 and await parcel_rows(database, t.id) == []
    assert s.by_status(await s.input_rows(database, t.id)) == {"Unassigned": 3}
    assert await s.counted(database, t.id) == {("Input", "Unassigned"): 3}
    assert failures(packer) == before + 1
    logged = [r for r in await s.log_rows(database, t.id) if r.EventType == "PackerFailed"]
    assert len(logged) == 1 and fragment in logged[0].Message


async def test_an_input_withheld_or_already_packed_is_refused_by_name(
    database: Database, plugins: Any
) -> None:
    t = await fed(database, plugins, 3, packer="PerInput")
    rows = await s.input_rows(database, t.id)
    table = execution.inputs
    async with database.transaction(RC) as conn:
        await conn.execute(
            sa.update(table)
            .where(table.c.InputID == rows[0].InputID)
            .values(DelayedUntil=datetime(2999, 1, 1))
        )
    offer = _Offer(database, t.id, 10)
    assert "withheld until 2999" in await offer.explain(UUID(bytes=rows[0].InputID))
    assert "was not offered" in await offer.explain(UUID(bytes=rows[1].InputID))
    await run_packer(database, plugins, t)
    assert "already decided (it is Assigned)" in await offer.explain(UUID(bytes=rows[1].InputID))


async def test_an_input_changed_after_the_claim_rolls_the_batch_back(
    database: Database, plugins: Any
) -> None:
    t = await fed(database, plugins, 3, packer="WriteOffOne")
    result = await run_packer(database, plugins, t)
    assert result.error is not None and "1 of 3 inputs to be assigned" in result.error
    assert await parcel_rows(database, t.id) == [] and await links(database, t.id) == {}
    assert s.by_status(await s.input_rows(database, t.id)) == {"Unassigned": 2, "NotProcessed": 1}


async def test_a_repacked_input_points_at_its_new_parcel_across_update_chunks(
    database: Database, plugins: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inputs packed before (their old links stay) are packed again in parcels of three,
    the Assigned move cut into chunks of whole parcels: each LastParcelID names the parcel of
    this batch, not the earlier one."""
    t = await fed(database, plugins, 8, packer="BySize", packer_args={"group_size": 3})
    t = replace(t, feeder_enabled=False)
    assert (await run_packer(database, plugins, t)).assigned == 8
    first = {bytes(r.InputID): bytes(r.LastParcelID) for r in await s.input_rows(database, t.id)}
    table = execution.inputs
    async with database.transaction(RC) as conn:  # as if every parcel failed and was retried
        await conn.execute(
            sa.update(table).where(table.c.TransformationID == t.id).values(Status="Unassigned")
        )
    monkeypatch.setattr(packing_db, "ASSIGN_CHUNK", 4)  # 3 + 3 + 2 inputs: two chunks of parcels
    result = await run_packer(database, plugins, t)
    assert (result.assigned, result.parcels, result.error) == (8, 3, None)
    rows = await s.input_rows(database, t.id)
    by_parcel = await links(database, t.id)
    assert len(by_parcel) == 6  # three old parcels, three new
    for row in rows:
        parcel_id = bytes(row.LastParcelID)
        assert parcel_id != first[bytes(row.InputID)]
        assert bytes(row.InputID) in by_parcel[parcel_id]
    assert sorted(len(by_parcel[bytes(r.LastParcelID)]) for r in rows) == [2, 2, 3, 3, 3, 3, 3, 3]


async def test_a_withheld_input_is_offered_once_the_database_clock_passes_its_time(
    database: Database, plugins: Any
) -> None:
    t = await fed(database, plugins, 3, packer="Spy")
    rows = await s.input_rows(database, t.id)
    table = execution.inputs
    async with database.transaction(RC) as conn:
        now = await db_now(conn)
        times = (now - timedelta(seconds=1), now + timedelta(hours=1), None)
        for row, until in zip(rows, times, strict=True):
            await conn.execute(
                sa.update(table).where(table.c.InputID == row.InputID).values(DelayedUntil=until)
            )
    result = await run_packer(database, plugins, t)
    assert result.offered == 2
    assert [r.lfn for r in SEEN["inputs"]] == [rows[0].LFN, rows[2].LFN]


POLICY = Policy.model_validate(
    {
        "requirements": {
            "memory_mb": {"max": 4096, "mode": "cap"},
            "cores": {"max": 8},
            "partitions": ["short"],
        }
    }
)


async def test_a_packers_requirements_are_held_to_the_policy(
    database: Database, plugins: Any
) -> None:
    """What a packer adds to a parcel's requirements cannot lift the installation's policy:
    memory over a `cap` limit is lowered to it; cores over a `refuse` limit, or a partition off
    the allow-list, make no parcel: the inputs are set aside Problematic, the limit named."""
    t = await fed(database, plugins, 4, packer="Greedy")
    result = await run_packer(database, plugins, t, policy=POLICY)
    assert (result.parcels, result.assigned, result.problematic) == (2, 2, 2)
    rows = await s.input_rows(database, t.id)
    assert [r.Status for r in rows] == ["Assigned", "Problematic", "Problematic", "Assigned"]
    parcels = await parcel_rows(database, t.id)
    capped = {**s.TEMPLATE, "memory_mb": 4096}
    assert [p.RequirementsID for p in parcels] == [content_hash(capped), content_hash(s.TEMPLATE)]
    logged = [r for r in await s.log_rows(database, t.id) if r.EventType == "InputProblematic"]
    reasons = {r.Data["input_id"]: r.Message for r in logged}
    assert reasons == {
        str(UUID(bytes=rows[1].InputID)): "its parcel's requirements are refused: cores 64 is "
        "over the installation's limit of 8 (policy.requirements.cores.max)",
        str(UUID(bytes=rows[2].InputID)): "its parcel's requirements are refused: admin-only "
        "not allowed: the installation allows the partitions short only "
        "(policy.requirements.partitions)",
    }
    await s.assert_counters_exact(database, t.id)
