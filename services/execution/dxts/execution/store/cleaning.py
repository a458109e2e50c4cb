"""SQL of cleaning a transformation's bulk rows: parcels with everything hanging off them, then
inputs from the leaves of their split lineages up.

The tables hanging off a parcel are found in the schema rather than listed: every table whose
ParcelID references Parcels (or a table that does, like DataParcelDeltas → DataParcels), which
includes every backend identifier table the dispatcher declares, present or future.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.schema import metadata
from dxts.core.schema.execution import inputs, parcel_inputs, parcels


@cache
def parcel_dependents() -> tuple[sa.Table, ...]:
    """Every table whose rows belong to a parcel, in an order that deletes children first."""
    reached = {parcels}
    grown = True
    while grown:
        grown = False
        for table in metadata.tables.values():
            if table in reached or "ParcelID" not in table.c:
                continue
            if any(
                fk.parent.name == "ParcelID" and fk.column.table in reached
                for fk in table.foreign_keys
            ):
                reached.add(table)
                grown = True
    return tuple(t for t in reversed(metadata.sorted_tables) if t in reached and t is not parcels)


async def live_parcels(
    conn: AsyncConnection, transformation_id: bytes, statuses: Sequence[str]
) -> int:
    return int(
        await conn.scalar(
            sa.select(sa.func.count())
            .select_from(parcels)
            .where(parcels.c.TransformationID == transformation_id, parcels.c.Status.in_(statuses))
        )
        or 0
    )


async def delete_parcels(conn: AsyncConnection, transformation_id: bytes, limit: int) -> int:
    """Delete up to `limit` of the transformation's parcels and every row hanging off them;
    returns the rows deleted."""
    ids = list(
        (
            await conn.execute(
                sa.select(parcels.c.ParcelID)
                .where(parcels.c.TransformationID == transformation_id)
                .order_by(parcels.c.ParcelID)
                .limit(limit)
            )
        ).scalars()
    )
    if not ids:
        return 0
    deleted = 0
    for table in parcel_dependents():
        condition: list[sa.ColumnElement[bool]] = [table.c.ParcelID.in_(ids)]
        if "TransformationID" in table.c:  # ParcelInputs: stay on its primary key
            condition.insert(0, table.c.TransformationID == transformation_id)
        deleted += (await conn.execute(sa.delete(table).where(*condition))).rowcount
    deleted += (await conn.execute(sa.delete(parcels).where(parcels.c.ParcelID.in_(ids)))).rowcount
    return deleted


async def delete_leaf_inputs(conn: AsyncConnection, transformation_id: bytes, limit: int) -> int:
    """Delete up to `limit` inputs that no input names as its parent, so that no delete ever
    cascades (InnoDB refuses a cascade deeper than 15 levels, and split depth is unbounded);
    returns the rows deleted."""
    child = inputs.alias("child")
    leaves = list(
        (
            await conn.execute(
                sa.select(inputs.c.InputID)
                .where(
                    inputs.c.TransformationID == transformation_id,
                    ~sa.exists().where(
                        child.c.TransformationID == transformation_id,
                        child.c.ParentInputID == inputs.c.InputID,
                    ),
                )
                .order_by(inputs.c.InputID)
                .limit(limit)
            )
        ).scalars()
    )
    if not leaves:
        return 0
    deleted = (
        await conn.execute(
            sa.delete(parcel_inputs).where(
                parcel_inputs.c.TransformationID == transformation_id,
                parcel_inputs.c.InputID.in_(leaves),
            )
        )
    ).rowcount
    deleted += (
        await conn.execute(
            sa.delete(inputs).where(
                inputs.c.TransformationID == transformation_id, inputs.c.InputID.in_(leaves)
            )
        )
    ).rowcount
    return deleted
