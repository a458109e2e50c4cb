"""The built-in packers (PerInput, BySize, ByRun, ByGroupSizeRun, DataManagement, Join) run by
the packer runner with execution's providers, on SQLite and MariaDB."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime
from typing import Any
from uuid import UUID

import runner_support as s
import sqlalchemy as sa
from definition_double import InMemoryTransformations

from dxts.core.catalogue import CatalogueFile, LocalFileCatalogue
from dxts.core.counters import journal_inputs, journal_parcels
from dxts.core.db import Database, db_now
from dxts.core.ids import input_hash, new_id
from dxts.core.schema import execution
from dxts.core.states import Kind
from dxts.execution.logic.feeding import run_feeder
from dxts.execution.logic.packing import run_packer

RC = s.RC


def files(items: list[tuple[str, int, dict[str, Any] | None]]) -> dict[str, Any]:
    return {"inputs": [{"lfn": f, "lfn_size": n, "descriptor": d} for f, n, d in items]}


async def fed(database: Database, plugins: Any, feeder_args: dict[str, Any], **options: Any) -> Any:
    t = await s.transformation(database, feeder="List", feeder_args=feeder_args, **options)
    assert (await run_feeder(database, plugins, t)).error is None
    return replace(t, feeder_enabled=True)  # more may come unless a test says otherwise


async def groups(database: Database, transformation_id: bytes) -> list[list[str]]:
    """Each parcel's input LFNs (or descriptor text), parcels and inputs in creation order."""
    rows = await s.input_rows(database, transformation_id)
    by_parcel: dict[bytes, list[str]] = {}
    for row in rows:
        if row.LastParcelID is not None:
            by_parcel.setdefault(bytes(row.LastParcelID), []).append(
                row.LFN or json.dumps(row.Descriptor)
            )
    return [by_parcel[key] for key in sorted(by_parcel)]


async def facets(database: Database, transformation_id: bytes) -> list[Any]:
    parcels, compute, data = execution.parcels, execution.compute_parcels, execution.data_parcels
    async with database.transaction(RC) as conn:
        return list(
            await conn.execute(
                sa.select(parcels.c.ParcelID, compute.c.Parameters, data.c.Request)
                .select_from(
                    parcels.outerjoin(compute, compute.c.ParcelID == parcels.c.ParcelID).outerjoin(
                        data, data.c.ParcelID == parcels.c.ParcelID
                    )
                )
                .where(parcels.c.TransformationID == transformation_id)
                .order_by(parcels.c.ParcelID)
            )
        )


async def deltas(database: Database, transformation_id: bytes) -> set[tuple[Any, ...]]:
    table, parcels = execution.data_parcel_deltas, execution.parcels
    async with database.transaction(RC) as conn:
        rows = await conn.execute(
            sa.select(table)
            .select_from(table.join(parcels, parcels.c.ParcelID == table.c.ParcelID))
            .where(parcels.c.TransformationID == transformation_id)
        )
        return {
            (r.StorageElement, r.FilesAdded, r.BytesAdded, r.FilesFreed, r.BytesFreed) for r in rows
        }


# --------------------------------------------------------------------- PerInput and BySize


async def test_per_input_fills_the_named_step_input(database: Database, plugins: Any) -> None:
    listed = {"inputs": [{"descriptor": {"seed": 3}}, {"lfn": "/lhcb/pi/a", "lfn_size": 9}]}
    t = await fed(database, plugins, listed, packer_args={"input_parameter": "seed"})
    assert (await run_packer(database, plugins, t)).parcels == 2
    parameters = [row.Parameters for row in await facets(database, t.id)]
    assert parameters == [
        {"seed": ['{"seed":3}']},
        {"seed": [{"class": "File", "location": "lfn:/lhcb/pi/a", "size": 9}]},
    ]
    bare = await fed(database, plugins, {"inputs": [{"descriptor": {"seed": 4}}]})
    await run_packer(database, plugins, bare)  # no driving input known: the ids travel alone
    assert [row.Parameters for row in await facets(database, bare.id)] == [{}]


async def test_by_size_holds_the_rest_until_the_feeder_is_off(
    database: Database, plugins: Any
) -> None:
    items = [(f"/lhcb/bs/{i}", 1, None) for i in range(5)]
    t = await fed(database, plugins, files(items), packer="BySize", packer_args={"group_size": 2})
    await run_packer(database, plugins, t)
    assert await groups(database, t.id) == [
        ["/lhcb/bs/0", "/lhcb/bs/1"],
        ["/lhcb/bs/2", "/lhcb/bs/3"],
    ]
    assert (await run_packer(database, plugins, t)).parcels == 0  # still active: held
    await run_packer(database, plugins, replace(t, feeder_enabled=False))
    assert (await groups(database, t.id))[-1] == ["/lhcb/bs/4"]
    await s.assert_counters_exact(database, t.id)


# ------------------------------------------------------------------ ByRun, ByGroupSizeRun


async def test_by_run_groups_each_run_and_sets_aside_inputs_without_one(
    database: Database, plugins: Any
) -> None:
    items = [
        ("/lhcb/r/1", 1, {"run": 10}),
        ("/lhcb/r/2", 1, {"run": 11}),
        ("/lhcb/r/3", 1, {"run": 10}),
        ("/lhcb/r/4", 1, None),
        ("/lhcb/r/5", 1, {"run": 11}),
        ("/lhcb/r/6", 1, {"run": 10}),
    ]
    t = await fed(database, plugins, files(items), packer="ByRun", packer_args={"group_size": 2})
    result = await run_packer(database, plugins, t)
    assert (result.parcels, result.problematic) == (2, 1)
    assert await groups(database, t.id) == [["/lhcb/r/1", "/lhcb/r/3"], ["/lhcb/r/2", "/lhcb/r/5"]]
    rows = {r.LFN: r for r in await s.input_rows(database, t.id)}
    assert rows["/lhcb/r/4"].Status == "Problematic"
    logged = [r for r in await s.log_rows(database, t.id) if r.EventType == "InputProblematic"]
    assert [r.Message for r in logged] == ["no 'run' in the descriptor to group by"]
    flushed = await run_packer(database, plugins, t, flush=True)
    assert flushed.parcels == 1 and (await groups(database, t.id))[-1] == ["/lhcb/r/6"]
    await s.assert_counters_exact(database, t.id)


async def test_by_group_size_run_keeps_storage_together(
    database: Database, plugins: Any, catalogue: LocalFileCatalogue
) -> None:
    where = {
        "/lhcb/k/1": ("CERN",),
        "/lhcb/k/2": ("RAL",),
        "/lhcb/k/3": ("CERN",),
        "/lhcb/k/4": ("RAL",),
    }
    await catalogue.register(
        [CatalogueFile(lfn=lfn, size=1, replicas=ses) for lfn, ses in where.items()]
    )
    items = [(lfn, 1, {"run": 7}) for lfn in where]
    args = {"group_size": 2, "keep_storage_together": True}
    t = await fed(database, plugins, files(items), packer="ByGroupSizeRun", packer_args=args)
    await run_packer(database, plugins, t)
    assert await groups(database, t.id) == [["/lhcb/k/1", "/lhcb/k/3"], ["/lhcb/k/2", "/lhcb/k/4"]]
    seeds = await fed(
        database,
        plugins,
        {"inputs": [{"descriptor": {"seed": n}} for n in range(3)]},
        packer="ByGroupSizeRun",
        packer_args={"group_size": 2},
    )
    result = await run_packer(database, plugins, replace(seeds, feeder_enabled=False))
    assert (result.parcels, result.assigned) == (2, 3)  # no run: one group of their own


# --------------------------------------------------------------------------- data parcels


async def test_replication_costs_each_destination_what_it_lacks(
    database: Database, plugins: Any, catalogue: LocalFileCatalogue
) -> None:
    await catalogue.register(
        [
            CatalogueFile(lfn="/lhcb/dm/a", size=100, replicas=("CERN-DST", "DISK")),
            CatalogueFile(lfn="/lhcb/dm/b", size=50, replicas=("DISK",)),
        ]
    )
    declared = {
        "data_management": {"operation": "replicate", "destination": ["CERN-DST", "RAL-DST"]}
    }
    t = await fed(
        database,
        plugins,
        files([("/lhcb/dm/a", 100, None), ("/lhcb/dm/b", 50, None)]),
        kind=Kind.DATA,
        packer="BySize",
        packer_args={"group_size": 2},
        annotations=declared,
    )
    await run_packer(database, plugins, t)
    (parcel,) = await facets(database, t.id)
    assert parcel.Parameters is None
    # Each file names the input it stands for: the backend reports each file's fate by it.
    ids = {
        row.LFN: [str(UUID(bytes=bytes(row.InputID)))] for row in await s.input_rows(database, t.id)
    }
    assert parcel.Request == {
        "Operations": [
            {
                "Type": "ReplicateAndRegister",
                "Files": [
                    {"LFN": "/lhcb/dm/a", "Size": 100, "Inputs": ids["/lhcb/dm/a"]},
                    {"LFN": "/lhcb/dm/b", "Size": 50, "Inputs": ids["/lhcb/dm/b"]},
                ],
                "TargetSE": ["CERN-DST", "RAL-DST"],
            }
        ]
    }
    assert await deltas(database, t.id) == {("CERN-DST", 1, 50, 0, 0), ("RAL-DST", 2, 150, 0, 0)}
    counted = await s.data_counted(database, t.id)
    assert counted[("Unassigned", "RAL-DST")]["LFNSizeAdded"] == 150


async def test_removals_free_what_the_storage_elements_hold(
    database: Database, plugins: Any, catalogue: LocalFileCatalogue
) -> None:
    await catalogue.register(
        [
            CatalogueFile(lfn="/lhcb/rm/a", size=10, replicas=("BUFFER", "TAPE")),
            CatalogueFile(lfn="/lhcb/rm/b", size=20, replicas=("TAPE",)),
        ]
    )
    items = files([("/lhcb/rm/a", 10, None), ("/lhcb/rm/b", 20, None)])
    buffer = await fed(
        database,
        plugins,
        items,
        kind=Kind.DATA,
        annotations={"data_management": {"operation": "remove", "storage": "BUFFER"}},
    )
    await run_packer(database, plugins, buffer)  # PerInput
    requests = [row.Request["Operations"][0] for row in await facets(database, buffer.id)]
    assert [(r["Type"], r["TargetSE"]) for r in requests] == [("RemoveReplica", ["BUFFER"])] * 2
    assert await deltas(database, buffer.id) == {("BUFFER", 0, 0, 1, 10)}
    whole = await fed(
        database,
        plugins,
        items,
        kind=Kind.DATA,
        packer="DataManagement",
        packer_args={"group_size": 2, "operation": {"operation": "remove"}},
    )
    await run_packer(database, plugins, whole)
    ((request,),) = [row.Request["Operations"] for row in await facets(database, whole.id)]
    assert request["Type"] == "RemoveFile" and "TargetSE" not in request
    assert await deltas(database, whole.id) == {("BUFFER", 0, 0, 1, 10), ("TAPE", 0, 0, 2, 30)}


async def test_a_data_packer_without_an_operation_fails_and_writes_nothing(
    database: Database, plugins: Any
) -> None:
    items = files([("/lhcb/no/a", 1, None)])
    t = await fed(database, plugins, items, kind=Kind.DATA)
    result = await run_packer(database, plugins, t)
    assert result.error is not None and "declares no data-management operation" in result.error
    compute = await fed(
        database,
        plugins,
        items,
        packer="DataManagement",
        packer_args={"operation": {"operation": "remove"}},
    )
    result = await run_packer(database, plugins, compute)
    assert result.error is not None and "packs Data transformations" in result.error
    assert await facets(database, t.id) == [] and await facets(database, compute.id) == []


# ------------------------------------------------------------------------------------- Join


class Step:
    """A producer: its record (with outputs), and how to make its inputs and parcels."""

    def __init__(self, database: Database, record: Any) -> None:
        self.database = database
        self.record = record
        self.output_id = record.outputs[0].output_id

    async def run(self, source: str, status: str, produced: list[str]) -> None:
        """An input on `source` in `status`; if it ran, its parcel and the files it made."""
        input_id, parcel_id = new_id(), new_id()
        tid = self.record.id
        async with self.database.transaction(RC) as conn:
            now = await db_now(conn)
            ran = status in ("Processed", "Failed", "Assigned")
            if ran:
                await conn.execute(
                    sa.insert(execution.parcels).values(
                        ParcelID=parcel_id,
                        TransformationID=tid,
                        Kind="Compute",
                        Status="Done" if status == "Processed" else "Assigned",
                        UpdatedAt=now,
                    )
                )
                await journal_parcels(
                    conn, {(tid, None, "Done" if status == "Processed" else "Assigned"): 1}
                )
            await conn.execute(
                sa.insert(execution.inputs).values(
                    TransformationID=tid,
                    InputID=input_id,
                    InputHash=input_hash(source, None),
                    LFN=source,
                    LFNSize=1,
                    Status=status,
                    LastParcelID=parcel_id if ran else None,
                    UpdatedAt=now,
                )
            )
            await journal_inputs(conn, {(tid, None, status): 1})
            if ran:
                await conn.execute(
                    sa.insert(execution.parcel_inputs).values(
                        TransformationID=tid, ParcelID=parcel_id, InputID=input_id
                    )
                )
            for lfn in produced:
                await conn.execute(
                    sa.insert(execution.parcel_outputs).values(
                        TransformationOutputID=self.output_id,
                        OutputID=new_id(),
                        ParcelID=parcel_id,
                        LFN=lfn,
                        LFNSize=2,
                    )
                )


async def test_join_pairs_each_driving_input_with_its_partner(
    database: Database, plugins: Any, definitions: InMemoryTransformations
) -> None:
    a = Step(database, await s.transformation(database, feeder="List", outputs=["reco"]))
    b = Step(database, await s.transformation(database, feeder="List", outputs=["reco"]))
    definitions.put(a.record)
    definitions.put(b.record)
    for n, partner_status in enumerate(["Processed", "Assigned", "NotProcessed", "Problematic"]):
        await a.run(f"/lhcb/raw/{n}", "Processed", [f"/lhcb/recoA/{n}"])
        await b.run(
            f"/lhcb/raw/{n}",
            partner_status,
            [f"/lhcb/recoB/{n}"] if partner_status == "Processed" else [],
        )
    driving = files([(f"/lhcb/recoA/{n}", 2, None) for n in range(4)] + [("/lhcb/stray", 1, None)])
    args = {
        "partner": str(UUID(bytes=b.output_id)),
        "partner_input": "other",
        "input_parameter": "mine",
    }
    consumer = await s.transformation(
        database,
        feeder="Edge",
        feeder_args={"transformation_output_id": str(UUID(bytes=a.output_id))},
        packer="Join",
        packer_args=args,
    )
    # The consumer's pool as the Edge feeder makes it (List here, to control what arrives).
    await run_feeder(database, plugins, replace(consumer, feeder="List", feeder_args=driving))
    result = await run_packer(database, plugins, consumer)
    assert (result.parcels, result.delayed, result.problematic) == (1, 2, 2)
    (parcel,) = await facets(database, consumer.id)
    assert parcel.Parameters == {
        "other": [{"class": "File", "location": "lfn:/lhcb/recoB/0"}],
        "mine": [{"class": "File", "location": "lfn:/lhcb/recoA/0", "size": 2}],
    }
    rows = {r.LFN: r for r in await s.input_rows(database, consumer.id)}
    assert {lfn: r.Status for lfn, r in rows.items()} == {
        "/lhcb/recoA/0": "Assigned",
        "/lhcb/recoA/1": "Unassigned",
        "/lhcb/recoA/2": "Problematic",
        "/lhcb/recoA/3": "Unassigned",
        "/lhcb/stray": "Problematic",
    }
    assert rows["/lhcb/recoA/1"].DelayedUntil > datetime(2000, 1, 1)
    assert rows["/lhcb/recoA/3"].DelayedUntil is not None
    reasons = {
        r.Message
        for r in await s.log_rows(database, consumer.id)
        if r.EventType == "InputProblematic"
    }
    assert reasons == {
        "the partner's input /lhcb/raw/2 ended NotProcessed",
        "not produced under the driving output",
    }
    await s.assert_counters_exact(database, consumer.id)
