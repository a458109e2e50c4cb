"""Reading the counters (through their construct: `Counter.read`, one statement, exact), and
the start-up that every counter's CounterLocks rows exist."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from dxts.core.counters import DATA_PARCELS, TRANSFORMATION, Reading
from dxts.core.counters.locks import ensure_lock_rows
from dxts.core.db import Database, Isolation


async def prepare(database: Database) -> None:
    """Start-up: every declared counter has its CounterLocks rows (idempotent)."""
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        await ensure_lock_rows(conn)


async def read_transformation_counts(
    database: Database, transformation_ids: Collection[bytes], entities: Sequence[str]
) -> Reading:
    """The Transformation counter for these transformations and entities, in one statement."""
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        return await TRANSFORMATION.read(
            conn, {"TransformationID": list(transformation_ids), "Entity": list(entities)}
        )


async def read_storage(
    database: Database,
    transformation_ids: Collection[bytes] | None,
    storage_elements: Collection[str] | None,
) -> Reading:
    """The DataParcels counter, narrowed to these transformations / storage elements (None:
    all of them), in one statement."""
    where: dict[str, Any] = {}
    if transformation_ids is not None:
        where["TransformationID"] = list(transformation_ids)
    if storage_elements is not None:
        where["StorageElement"] = list(storage_elements)
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        return await DATA_PARCELS.read(conn, where)
