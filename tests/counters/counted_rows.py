"""Rows for the counter tests: parents (Ownership, Transformations), counted rows, recounts.

The counted tables carry foreign keys to Transformations → Ownership, so every test creates its
transformations here first. Counted rows are created as a real writer creates them: the rows and
their journal deltas in one transaction. The recounts are plain COUNT(*)/SUM ... GROUP BY over
the counted tables, written independently of the counters' own source declarations, so that a
wrong declaration cannot agree with itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.counters import (
    DATA_PARCELS,
    TRANSFORMATION,
    StorageDelta,
    journal_data_parcels,
    journal_inputs,
    journal_parcels,
)
from dxts.core.counters.construct import Counter
from dxts.core.db import Database, utcnow
from dxts.core.ids import input_hash, new_id, new_ids
from dxts.core.schema import definition, execution

inputs, parcels = execution.inputs, execution.parcels


async def make_transformations(conn: AsyncConnection, count: int = 1) -> list[bytes]:
    """`count` standalone transformations under one fresh Ownership row."""
    ownership_id = new_id()
    await conn.execute(
        sa.insert(definition.ownership).values(OwnershipID=ownership_id, VO="lhcb", Sub="someone")
    )
    ids = new_ids(count)
    await conn.execute(
        sa.insert(definition.transformations).values(
            [
                {
                    "TransformationID": tid,
                    "OwnershipID": ownership_id,
                    "Type": "Test",
                    "Kind": "Compute",
                    "Packer": "test",
                    "UpdatedAt": utcnow(),
                }
                for tid in ids
            ]
        )
    )
    return ids


async def add_inputs(
    conn: AsyncConnection, transformation_id: bytes, count: int, status: str = "Unassigned"
) -> list[bytes]:
    """Create `count` inputs in `status`, journalling the creation in the same transaction."""
    ids = new_ids(count)
    await conn.execute(
        sa.insert(inputs).values(
            [
                {
                    "TransformationID": transformation_id,
                    "InputID": input_id,
                    "InputHash": input_hash(None, {"n": input_id.hex()}),
                    "Status": status,
                    "UpdatedAt": utcnow(),
                }
                for input_id in ids
            ]
        )
    )
    await journal_inputs(conn, {(transformation_id, None, status): count})
    return ids


async def add_parcels(
    conn: AsyncConnection,
    transformation_id: bytes | None,
    count: int,
    status: str = "Unassigned",
    kind: str = "Compute",
) -> list[bytes]:
    """Create `count` parcels (a None transformation makes user parcels, which are not counted)."""
    ids = new_ids(count)
    await conn.execute(
        sa.insert(parcels).values(
            [
                {
                    "ParcelID": parcel_id,
                    "TransformationID": transformation_id,
                    "Kind": kind,
                    "Status": status,
                    "UpdatedAt": utcnow(),
                }
                for parcel_id in ids
            ]
        )
    )
    if transformation_id is not None:
        await journal_parcels(conn, {(transformation_id, None, status): count})
    return ids


async def add_data_parcel(
    conn: AsyncConnection,
    transformation_id: bytes,
    deltas: dict[str, StorageDelta],
    status: str = "Unassigned",
) -> bytes:
    """A data parcel with one DataParcelDeltas row per storage element, journalled."""
    (parcel_id,) = await add_parcels(conn, transformation_id, 1, status, kind="Data")
    await conn.execute(sa.insert(execution.data_parcels).values(ParcelID=parcel_id, Request={}))
    await conn.execute(
        sa.insert(execution.data_parcel_deltas).values(
            [
                {
                    "ParcelID": parcel_id,
                    "StorageElement": se,
                    "FilesAdded": d.files_added,
                    "BytesAdded": d.bytes_added,
                    "FilesFreed": d.files_freed,
                    "BytesFreed": d.bytes_freed,
                }
                for se, d in deltas.items()
            ]
        )
    )
    await journal_data_parcels(
        conn, {(transformation_id, None, status, se): d for se, d in deltas.items()}
    )
    return parcel_id


async def recount(conn: AsyncConnection, transformation_ids: Sequence[bytes]) -> dict[Any, Any]:
    """TransformationCounters' truth: COUNT(*) per (TransformationID, Entity, Status)."""
    found: dict[Any, Any] = {}
    for entity, table in (("Input", inputs), ("Parcel", parcels)):
        rows = await conn.execute(
            sa.select(table.c.TransformationID, table.c.Status, sa.func.count())
            .where(table.c.TransformationID.in_(transformation_ids))
            .group_by(table.c.TransformationID, table.c.Status)
        )
        for tid, status, count in rows:
            found[(tid, entity, status)] = {"Count": count}
    return found


async def recount_data(
    conn: AsyncConnection, transformation_ids: Sequence[bytes]
) -> dict[Any, Any]:
    """DataParcelsCounters' truth: the DataParcelDeltas quantities per parcel status and SE."""
    deltas = execution.data_parcel_deltas
    rows = await conn.execute(
        sa.select(
            parcels.c.TransformationID,
            parcels.c.Status,
            deltas.c.StorageElement,
            sa.func.sum(deltas.c.FilesAdded),
            sa.func.sum(deltas.c.BytesAdded),
            sa.func.sum(deltas.c.FilesFreed),
            sa.func.sum(deltas.c.BytesFreed),
        )
        .join(deltas, deltas.c.ParcelID == parcels.c.ParcelID)
        .where(parcels.c.TransformationID.in_(transformation_ids))
        .group_by(parcels.c.TransformationID, parcels.c.Status, deltas.c.StorageElement)
    )
    return {
        tuple(row[:3]): dict(zip(DATA_PARCELS.measures, map(int, row[3:]), strict=True))
        for row in rows
        if any(row[3:])
    }


async def fold_all(database: Database, counter: Counter = TRANSFORMATION, batch: int = 100) -> int:
    """Fold until the journal is empty; returns how many rows were folded."""
    folded = 0
    while True:
        result = await counter.fold(database, batch)
        folded += result.folded
        if not result.full:
            return folded


async def table_rows(conn: AsyncConnection, table: sa.Table, tid: bytes) -> int:
    return int(
        await conn.scalar(
            sa.select(sa.func.count()).select_from(table).where(table.c.TransformationID == tid)
        )
        or 0
    )


@contextlib.contextmanager
def statements(database: Database) -> Iterator[list[str]]:
    """Every SQL statement the engine sends while the block runs."""
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    engine = database.engine.sync_engine
    sa.event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        sa.event.remove(engine, "before_cursor_execute", record)
