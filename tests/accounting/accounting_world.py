"""A fixture workgraph for the accounting tests, written the way the real writers write it.

Three members (simulate and reconstruct, compute; replicate, data) with inputs and parcels in
several statuses, data parcels with DataParcelDeltas on three storage elements, and log rows.
Rows are created in a first status and then moved by conditional UPDATEs, each move journalled
in the same transaction with the UPDATE's row count, exactly as execution will. The expected
values are written out by hand, and `recount` recounts the tables with plain COUNT(*), so a
counter that agrees with itself but not with its tables fails.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.accounting.logic.members import Member, WorkgraphMembers
from dxts.accounting.settings import AccountingSettings
from dxts.core.counters import (
    StorageDelta,
    journal_data_parcels,
    journal_inputs,
    journal_parcels,
)
from dxts.core.db import Database, Isolation, db_now
from dxts.core.errors import NotFound
from dxts.core.ids import input_hash, new_id, new_ids
from dxts.core.logs import LogEntry, log_transformations, log_workgraphs
from dxts.core.schema import definition, execution
from dxts.core.schema.accounting import transformation_log
from dxts.core.states import Kind, TransformationStatus, WorkgraphStatus

RC = Isolation.READ_COMMITTED

# Final statuses, by hand: what every read must answer.
INPUTS = {
    "simulate": {"Unassigned": 5, "Assigned": 3, "Processed": 7, "Failed": 1},
    "reconstruct": {"Unassigned": 2, "Processed": 4},
    "replicate": {"Assigned": 3},
}
PARCELS = {
    "simulate": {"Assigned": 2, "Done": 3, "Failed": 1},
    "reconstruct": {"Unassigned": 1},
    "replicate": {"Unassigned": 1, "Assigned": 1, "Done": 1},
}
# The replicate member's data parcels: final status -> storage element -> quantities.
DATA = {
    "Unassigned": {"SE-A": StorageDelta(2, 200, 0, 0), "SE-B": StorageDelta(0, 0, 1, 50)},
    "Assigned": {"SE-A": StorageDelta(1, 100, 0, 0)},
    "Done": {"SE-A": StorageDelta(4, 400, 0, 0), "SE-C": StorageDelta(0, 0, 2, 20)},
}
TRANSFORMATION_LOG_ENTRIES = 25

# Small batches, so that folding the fixture takes several full batches; short pauses, so that
# running sweeps get on with it.
SETTINGS = AccountingSettings(
    fold_batch=7,
    fold_interval_s=0.01,
    fold_standby_s=0.01,
    metrics_interval_s=0.05,
    drift_interval_s=0.05,
    drift_debounce_s=0.01,
)


@dataclass
class World:
    workgraph_id: bytes
    ids: dict[str, bytes]  # step -> TransformationID
    members: WorkgraphMembers
    log_times: list[Any] = field(default_factory=list)  # CreatedAt of each log batch


class Lister:
    """The MemberLister double: knows the fixture workgraphs, records forwarded tokens."""

    def __init__(self) -> None:
        self.workgraphs: dict[bytes, WorkgraphMembers] = {}
        self.tokens: list[str | None] = []

    async def workgraph(self, workgraph_id: bytes, *, token: str | None) -> WorkgraphMembers:
        self.tokens.append(token)
        try:
            return self.workgraphs[workgraph_id]
        except KeyError:
            raise NotFound("workgraph", workgraph_id.hex()) from None


async def transformations(
    conn: AsyncConnection, kinds: dict[str, str], workgraph_id: bytes | None = None
) -> dict[str, bytes]:
    """Transformations (step -> Kind) under one fresh Ownership row."""
    ownership_id = new_id()
    await conn.execute(
        sa.insert(definition.ownership),
        [{"OwnershipID": ownership_id, "VO": "lhcb", "Sub": "alice", "WorkgraphID": workgraph_id}],
    )
    now = await db_now(conn)
    ids = dict(zip(kinds, new_ids(len(kinds)), strict=True))
    await conn.execute(
        sa.insert(definition.transformations),
        [
            {
                "TransformationID": ids[step],
                "OwnershipID": ownership_id,
                "Type": step.capitalize(),
                "Kind": kind,
                "Status": "Active",
                "Packer": "test",
                "UpdatedAt": now,
            }
            for step, kind in kinds.items()
        ],
    )
    return ids


async def add_inputs(conn: AsyncConnection, tid: bytes, final: dict[str, int]) -> None:
    """Inputs created Unassigned, then moved to their final status by conditional UPDATEs."""
    now = await db_now(conn)
    total = sum(final.values())
    ids = new_ids(total)
    await conn.execute(
        sa.insert(execution.inputs),
        [
            {
                "TransformationID": tid,
                "InputID": input_id,
                "InputHash": input_hash(f"/lhcb/{input_id.hex()}", None),
                "LFN": f"/lhcb/{input_id.hex()}",
                "Status": "Unassigned",
                "UpdatedAt": now,
            }
            for input_id in ids
        ],
    )
    await journal_inputs(conn, {(tid, None, "Unassigned"): total})
    start = 0
    for status, count in final.items():
        if status == "Unassigned":
            start += count
            continue
        chosen = ids[start : start + count]
        start += count
        inputs = execution.inputs
        moved = await conn.execute(
            sa.update(inputs)
            .where(
                inputs.c.TransformationID == tid,
                inputs.c.InputID.in_(chosen),
                inputs.c.Status == "Unassigned",
            )
            .values(Status=status)
        )
        await journal_inputs(conn, {(tid, "Unassigned", status): moved.rowcount})


async def add_parcels(
    conn: AsyncConnection, tid: bytes, final: dict[str, int], kind: str = "Compute"
) -> dict[str, list[bytes]]:
    """Parcels created Unassigned, then moved to their final status; their ids by status."""
    now = await db_now(conn)
    by_status = {status: new_ids(count) for status, count in final.items()}
    await conn.execute(
        sa.insert(execution.parcels),
        [
            {
                "ParcelID": pid,
                "TransformationID": tid,
                "Kind": kind,
                "Status": "Unassigned",
                "UpdatedAt": now,
            }
            for ids in by_status.values()
            for pid in ids
        ],
    )
    await journal_parcels(conn, {(tid, None, "Unassigned"): sum(final.values())})
    parcels = execution.parcels
    for status, ids in by_status.items():
        if status == "Unassigned":
            continue
        moved = await conn.execute(
            sa.update(parcels)
            .where(parcels.c.ParcelID.in_(ids), parcels.c.Status == "Unassigned")
            .values(Status=status)
        )
        await journal_parcels(conn, {(tid, "Unassigned", status): moved.rowcount})
    return by_status


async def add_data_parcels(conn: AsyncConnection, tid: bytes) -> None:
    """The replicate member's data parcels: DataParcels, DataParcelDeltas, both counters."""
    by_status = await add_parcels(conn, tid, {s: 1 for s in DATA}, kind="Data")
    await conn.execute(
        sa.insert(execution.data_parcels),
        [{"ParcelID": ids[0], "Request": {"op": "replicate"}} for ids in by_status.values()],
    )
    await conn.execute(
        sa.insert(execution.data_parcel_deltas),
        [
            {
                "ParcelID": by_status[status][0],
                "StorageElement": se,
                "FilesAdded": d.files_added,
                "BytesAdded": d.bytes_added,
                "FilesFreed": d.files_freed,
                "BytesFreed": d.bytes_freed,
            }
            for status, deltas in DATA.items()
            for se, d in deltas.items()
        ],
    )
    # Created Unassigned with the packer's deltas, then moved with their parcel.
    moves: list[tuple[tuple[bytes, str | None, str | None, str], StorageDelta]] = []
    for status, deltas in DATA.items():
        for se, d in deltas.items():
            moves.append(((tid, None, "Unassigned", se), d))
            if status != "Unassigned":
                moves.append(((tid, "Unassigned", status, se), d))
    await journal_data_parcels(conn, moves)


async def build_world(database: Database) -> World:
    workgraph_id = new_id()
    async with database.transaction(RC) as conn:
        await conn.execute(
            sa.insert(definition.workgraphs),
            [
                {
                    "WorkgraphID": workgraph_id,
                    "Type": "MCSimulation",
                    "Status": "Active",
                    "StrippedSpec": {},
                    "UpdatedAt": await db_now(conn),
                }
            ],
        )
        ids = await transformations(
            conn,
            {"simulate": "Compute", "reconstruct": "Compute", "replicate": "Data"},
            workgraph_id,
        )
    for step, tid in ids.items():
        async with database.transaction(RC) as conn:
            await add_inputs(conn, tid, INPUTS[step])
            if step == "replicate":
                await add_data_parcels(conn, tid)
            else:
                await add_parcels(conn, tid, PARCELS[step])
    members = WorkgraphMembers(
        workgraph_id,
        WorkgraphStatus.ACTIVE,
        tuple(
            Member(
                tid,
                step,
                Kind.DATA if step == "replicate" else Kind.COMPUTE,
                TransformationStatus.PAUSED
                if step == "reconstruct"
                else TransformationStatus.ACTIVE,
            )
            for step, tid in ids.items()
        ),
    )
    world = World(workgraph_id, ids, members)
    await add_logs(database, world)
    return world


async def add_logs(database: Database, world: World) -> None:
    """Workgraph state changes, and the simulate member's log in two batches written at two
    distinct database times (recorded in `world.log_times`)."""
    async with database.transaction(RC) as conn:
        await log_workgraphs(
            conn,
            [
                LogEntry(world.workgraph_id, "StateChange", "alice", None, "New"),
                LogEntry(world.workgraph_id, "StateChange", "alice", "New", "Active"),
            ],
        )
    first = TRANSFORMATION_LOG_ENTRIES - 5
    for batch in (range(first), range(first, TRANSFORMATION_LOG_ENTRIES)):
        async with database.transaction(RC) as conn:
            for _ in range(1000):  # the clock must move on (SQLite: milliseconds)
                if not world.log_times or await db_now(conn) > world.log_times[-1]:
                    break
                await asyncio.sleep(0.001)
            await log_transformations(
                conn,
                [
                    LogEntry(
                        world.ids["simulate"], "Comment", "bob", message=f"note {n}", data={"n": n}
                    )
                    for n in batch
                ],
            )
            log = transformation_log
            world.log_times.append(
                await conn.scalar(
                    sa.select(sa.func.max(log.c.CreatedAt)).where(
                        log.c.TransformationID == world.ids["simulate"]
                    )
                )
            )


async def recount(database: Database, tid: bytes, entity: str) -> dict[str, int]:
    """COUNT(*) per status of one transformation's inputs or parcels."""
    table = execution.inputs if entity == "Input" else execution.parcels
    async with database.transaction(RC) as conn:
        rows = await conn.execute(
            sa.select(table.c.Status, sa.func.count())
            .where(table.c.TransformationID == tid)
            .group_by(table.c.Status)
        )
        return {status: int(n) for status, n in rows}


async def journal_depth(database: Database, journal: sa.Table) -> int:
    async with database.transaction(RC) as conn:
        return int(await conn.scalar(sa.select(sa.func.count()).select_from(journal)) or 0)
