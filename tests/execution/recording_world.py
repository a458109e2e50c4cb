"""Rows for the outcome, failed-input, operation and cleaning tests (execution, part 2).

Inputs and parcels are created as the feeder and the packer create them — rows and creation
journals in one transaction — and parcels are taken to Reserved/Assigned as the dispatcher takes
them, journals included, so that every test can compare the counters with a plain recount.
The recounts are written independently of the counter declarations.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from definition_double import InMemoryTransformations
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core import content_store
from dxts.core.adaptor.mapping import outcome_to_proto
from dxts.core.counters import (
    DATA_PARCELS,
    TRANSFORMATION,
    StorageDelta,
    ensure_lock_rows,
    journal_data_parcels,
    journal_inputs,
    journal_parcels,
)
from dxts.core.db import Database, Isolation, db_now
from dxts.core.ids import id_to_str, input_hash, new_id, new_ids
from dxts.core.schema import definition, execution, metadata
from dxts.core.states import Kind
from dxts.execution.logic.parcel_annotations import stored_outcome
from dxts.execution.logic.transformations import ActiveTransformation, Output
from dxts.v1 import common_pb2

RC = Isolation.READ_COMMITTED
TOOL = {
    "class": "CommandLineTool",
    "cwlVersion": "v1.2",
    "baseCommand": "true",
    "inputs": {},
    "outputs": {},
}
BACKEND = "null"
STATUS_REPORT = "status-report"


@dataclass
class World:
    """One transformation: its id and declared outputs (name → TransformationOutputID)."""

    transformation_id: bytes
    outputs: dict[str, bytes] = field(default_factory=dict)
    kind: str = "Compute"
    vo: str = "lhcb"
    sub: str = "alice"
    hooks: dict[str, Any] | None = None

    def record(self, **changes: Any) -> ActiveTransformation:
        """As the definition side describes it (ListActiveTransformations)."""
        return ActiveTransformation(
            id=self.transformation_id,
            type="Test",
            kind=Kind(self.kind),
            packer="PerInput",
            vo=self.vo,
            owner_sub=self.sub,
            outputs=tuple(Output(oid, name) for name, oid in self.outputs.items()),
            **changes,
        )


def definitions(*worlds: World) -> InMemoryTransformations:
    """The tests' definition service, knowing these transformations."""
    return InMemoryTransformations([world.record() for world in worlds])


async def empty(database: Database) -> None:
    """Every table emptied, children first (the counter lock rows are put back)."""
    async with database.transaction(RC) as conn:
        # Split lineages first: InnoDB cascades no deeper than 15 levels.
        await conn.execute(sa.update(execution.inputs).values(ParentInputID=None))
        for table in reversed(metadata.sorted_tables):
            await conn.execute(table.delete())
        await ensure_lock_rows(conn)


async def transformation(
    database: Database,
    *,
    outputs: Sequence[str] = ("out", STATUS_REPORT),
    kind: str = "Compute",
    vo: str = "lhcb",
    sub: str = "alice",
    hooks: dict[str, Any] | None = None,
) -> World:
    ownership_id, tid = new_id(), new_id()
    output_ids = dict(zip(outputs, new_ids(len(outputs)), strict=True))

    async def work(conn: AsyncConnection) -> None:
        await ensure_lock_rows(conn)
        await conn.execute(
            sa.insert(definition.ownership).values(OwnershipID=ownership_id, VO=vo, Sub=sub)
        )
        await conn.execute(
            sa.insert(definition.transformations).values(
                TransformationID=tid,
                OwnershipID=ownership_id,
                Type="Test",
                Kind=kind,
                Status="Active",
                Packer="PerInput",
                Hooks=hooks,
                UpdatedAt=await db_now(conn),
            )
        )
        if output_ids:
            await conn.execute(
                sa.insert(definition.transformation_outputs),
                [
                    {
                        "TransformationOutputID": oid,
                        "TransformationID": tid,
                        "Name": name,
                        "Intermediate": False,
                    }
                    for name, oid in output_ids.items()
                ],
            )

    await database.run(work, isolation=RC)
    return World(tid, output_ids, kind, vo, sub, hooks)


async def feed(
    database: Database, world: World, count: int, *, prefix: str = "/lhcb/in"
) -> list[bytes]:
    """`count` Unassigned file inputs."""
    ids = new_ids(count)

    async def work(conn: AsyncConnection) -> None:
        now = await db_now(conn)
        rows = []
        for input_id in ids:
            lfn = f"{prefix}/{input_id.hex()}.dst"
            rows.append(
                {
                    "TransformationID": world.transformation_id,
                    "InputID": input_id,
                    "InputHash": input_hash(lfn, None),
                    "LFN": lfn,
                    "LFNSize": 1000,
                    "Status": "Unassigned",
                    "UpdatedAt": now,
                }
            )
        await conn.execute(sa.insert(execution.inputs), rows)
        await journal_inputs(conn, {(world.transformation_id, None, "Unassigned"): count})

    await database.run(work, isolation=RC)
    return ids


async def pack(
    database: Database,
    world: World,
    groups: Sequence[Sequence[bytes]],
    *,
    status: str = "Assigned",
    backend: str | None = BACKEND,
    deltas: dict[str, StorageDelta] | None = None,
) -> list[bytes]:
    """One parcel per group of Unassigned inputs (inputs → Assigned), then taken by the
    'dispatcher' to `status` (Unassigned, Reserved or Assigned)."""
    tid = world.transformation_id
    ids = new_ids(len(groups))
    ladder = ["Unassigned", "Reserved", "Assigned"]
    path = ladder[: ladder.index(status) + 1]

    async def work(conn: AsyncConnection) -> None:
        now = await db_now(conn)
        await conn.execute(
            sa.insert(execution.parcels),
            [
                {
                    "ParcelID": p,
                    "TransformationID": tid,
                    "Kind": world.kind,
                    "Status": status,
                    "Backend": backend if status != "Unassigned" else None,
                    "UpdatedAt": now,
                }
                for p in ids
            ],
        )
        if world.kind == "Compute":
            (process_id,) = await content_store.put_processes(conn, [TOOL])
            await conn.execute(
                sa.insert(execution.compute_parcels),
                [{"ParcelID": p, "ProcessID": process_id, "Parameters": {}} for p in ids],
            )
        else:
            await conn.execute(
                sa.insert(execution.data_parcels),
                [{"ParcelID": p, "Request": {"Operations": []}} for p in ids],
            )
            if deltas:
                await conn.execute(
                    sa.insert(execution.data_parcel_deltas),
                    [
                        {
                            "ParcelID": p,
                            "StorageElement": se,
                            "FilesAdded": d.files_added,
                            "BytesAdded": d.bytes_added,
                            "FilesFreed": d.files_freed,
                            "BytesFreed": d.bytes_freed,
                        }
                        for p in ids
                        for se, d in deltas.items()
                    ],
                )
        links = [
            {"TransformationID": tid, "ParcelID": p, "InputID": i}
            for p, group in zip(ids, groups, strict=True)
            for i in group
        ]
        if links:
            await conn.execute(sa.insert(execution.parcel_inputs), links)
        for p, group in zip(ids, groups, strict=True):
            if group:
                result = await conn.execute(
                    sa.update(execution.inputs)
                    .where(
                        execution.inputs.c.TransformationID == tid,
                        execution.inputs.c.InputID.in_(group),
                        execution.inputs.c.Status == "Unassigned",
                    )
                    .values(Status="Assigned", LastParcelID=p, UpdatedAt=now)
                )
                assert result.rowcount == len(group)
        packed = sum(len(g) for g in groups)
        await journal_inputs(conn, {(tid, "Unassigned", "Assigned"): packed})
        moves: dict[tuple[bytes, str | None, str | None], int] = {}
        previous: str | None = None
        for step in path:
            moves[(tid, previous, step)] = len(ids)
            previous = step
        await journal_parcels(conn, moves)
        if world.kind == "Data" and deltas:
            data_moves: dict[tuple[bytes, str | None, str | None, str], StorageDelta] = {}
            for se, d in deltas.items():
                previous = None
                for step in path:
                    total = StorageDelta(*(q * len(ids) for q in d))
                    data_moves[(tid, previous, step, se)] = total
                    previous = step
            await journal_data_parcels(conn, data_moves)

    await database.run(work, isolation=RC)
    return ids


async def user_parcel(database: Database, *, status: str = "Assigned") -> bytes:
    parcel_id = new_id()

    async def work(conn: AsyncConnection) -> None:
        await conn.execute(
            sa.insert(execution.parcels).values(
                ParcelID=parcel_id,
                Kind="Compute",
                Status=status,
                Backend=BACKEND,
                UpdatedAt=await db_now(conn),
            )
        )
        await conn.execute(
            sa.insert(execution.user_parcels).values(ParcelID=parcel_id, VO="lhcb", Sub="bob")
        )
        (process_id,) = await content_store.put_processes(conn, [TOOL])
        await conn.execute(
            sa.insert(execution.compute_parcels).values(ParcelID=parcel_id, ProcessID=process_id)
        )

    await database.run(work, isolation=RC)
    return parcel_id


def outcome(
    parcel_id: bytes,
    *,
    result: int = common_pb2.OUTCOME_RESULT_SUCCEEDED,
    report: dict[str, Any] | str | None = None,
    files: Sequence[tuple[str, str]] = (),
    backend: str = BACKEND,
    message: str = "",
    output_object: str = "",
) -> common_pb2.Outcome:
    """An outcome as the dispatcher forwards it; `files` are (output name, LFN), `output_object`
    the CWL output object's JSON."""
    return common_pb2.Outcome(
        parcel_id=id_to_str(parcel_id),
        backend=backend,
        identifier=id_to_str(new_id()),
        result=result,  # type: ignore[arg-type]
        outputs=[
            common_pb2.OutputFile(output_name=name, lfn=lfn, size=10, storage_element="SE-A")
            for name, lfn in files
        ],
        status_report_json=report
        if isinstance(report, str)
        else json.dumps(report or {})
        if report is not None
        else "",
        message=message,
        output_object_json=output_object,
    )


def stored_message(annotations: Any) -> common_pb2.Outcome | None:
    """The outcome stored on a parcel as GetParcel answers it (None when there is none)."""
    stored = stored_outcome(annotations)
    return None if stored is None else outcome_to_proto(stored)


def report(**fates: Any) -> dict[str, Any]:
    """{input id: entry}: `report(**{id_to_str(i): "SUCCESS"})`; an entry may be a dict."""
    return {k: v if isinstance(v, dict) else {"action": v} for k, v in fates.items()}


# -- reading back -------------------------------------------------------------------------------


async def inputs_of(database: Database, tid: bytes) -> dict[bytes, Any]:
    async with database.transaction(RC) as conn:
        rows = await conn.execute(
            sa.select(execution.inputs).where(execution.inputs.c.TransformationID == tid)
        )
        return {bytes(r.InputID): r for r in rows}


async def parcel(database: Database, parcel_id: bytes) -> Any:
    async with database.transaction(RC) as conn:
        return (
            await conn.execute(
                sa.select(execution.parcels).where(execution.parcels.c.ParcelID == parcel_id)
            )
        ).one_or_none()


async def parcels_of(database: Database, tid: bytes) -> list[Any]:
    async with database.transaction(RC) as conn:
        return list(
            await conn.execute(
                sa.select(execution.parcels)
                .where(execution.parcels.c.TransformationID == tid)
                .order_by(execution.parcels.c.ParcelID)
            )
        )


async def rows_of(database: Database, table: sa.Table, **where: Any) -> list[Any]:
    async with database.transaction(RC) as conn:
        statement = sa.select(table)
        for name, value in where.items():
            statement = statement.where(table.c[name] == value)
        return list(await conn.execute(statement))


async def statuses(database: Database, tid: bytes) -> Counter[str]:
    return Counter(row.Status for row in (await inputs_of(database, tid)).values())


async def snapshot(database: Database) -> dict[str, list[tuple[Any, ...]]]:
    """Every execution row and counter journal row, sorted: for 'nothing changed' checks."""
    tables = [
        execution.inputs,
        execution.parcels,
        execution.parcel_inputs,
        execution.parcel_outputs,
        execution.compute_parcels,
        execution.user_parcels,
        TRANSFORMATION.journal_table,
        DATA_PARCELS.journal_table,
    ]
    found = {}
    async with database.transaction(RC) as conn:
        for table in tables:
            rows = await conn.execute(sa.select(table))
            found[table.name] = sorted(
                tuple(json.dumps(v, sort_keys=True, default=str) for v in row) for row in rows
            )
    return found


async def assert_counters_exact(database: Database) -> None:
    """Every counter reading equals a plain recount of the rows it counts."""
    p, i, d = execution.parcels, execution.inputs, execution.data_parcel_deltas
    async with database.transaction(RC) as conn:
        recount = {
            (bytes(r[0]), "Parcel", r[1]): int(r[2])
            for r in await conn.execute(
                sa.select(p.c.TransformationID, p.c.Status, sa.func.count())
                .where(p.c.TransformationID.is_not(None))
                .group_by(p.c.TransformationID, p.c.Status)
            )
        }
        recount.update(
            {
                (bytes(r[0]), "Input", r[1]): int(r[2])
                for r in await conn.execute(
                    sa.select(i.c.TransformationID, i.c.Status, sa.func.count()).group_by(
                        i.c.TransformationID, i.c.Status
                    )
                )
            }
        )
        data_recount = {
            (bytes(r[0]), r[1], r[2]): (int(r[3]), int(r[4]), int(r[5]), int(r[6]))
            for r in await conn.execute(
                sa.select(
                    p.c.TransformationID,
                    p.c.Status,
                    d.c.StorageElement,
                    sa.func.sum(d.c.FilesAdded),
                    sa.func.sum(d.c.BytesAdded),
                    sa.func.sum(d.c.FilesFreed),
                    sa.func.sum(d.c.BytesFreed),
                )
                .select_from(p.join(d, d.c.ParcelID == p.c.ParcelID))
                .group_by(p.c.TransformationID, p.c.Status, d.c.StorageElement)
            )
        }
        counted = {
            (bytes(k[0]), k[1], k[2]): v["Count"]
            for k, v in (await TRANSFORMATION.read(conn)).items()
        }
        data_counted = {
            (bytes(k[0]), k[1], k[2]): tuple(v.values())
            for k, v in (await DATA_PARCELS.read(conn)).items()
        }
    assert counted == recount
    assert data_counted == data_recount
