"""SQL of GroupFailures: the latest failed parcels of some transformations, and the inputs of
the few shown as examples; one statement each, on the (TransformationID, Status) index and
ParcelInputs' primary key."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.schema.execution import parcel_inputs, parcels
from dxts.core.states import ParcelStatus
from dxts.execution.records import ParcelRecord


def failed_at() -> sa.ColumnElement[datetime]:
    """When a parcel failed: its completion, else its last update."""
    return sa.func.coalesce(parcels.c.CompletedAt, parcels.c.UpdatedAt)


async def failed_parcels(
    conn: AsyncConnection,
    transformation_ids: Sequence[bytes],
    since: datetime | None,
    limit: int,
) -> list[ParcelRecord]:
    """The Failed parcels of the transformations, the latest first, at most `limit`."""
    c = parcels.c
    conditions = [c.TransformationID.in_(transformation_ids), c.Status == ParcelStatus.FAILED]
    if since is not None:
        conditions.append(failed_at() >= since)
    rows = await conn.execute(
        sa.select(parcels).where(*conditions).order_by(failed_at().desc(), c.ParcelID).limit(limit)
    )
    return [ParcelRecord.of(row) for row in rows]


async def input_ids_of(
    conn: AsyncConnection, parcel_ids: Sequence[bytes]
) -> dict[bytes, list[bytes]]:
    """ParcelID → the ids of the inputs it carried."""
    if not parcel_ids:
        return {}
    pi = parcel_inputs.c
    rows = await conn.execute(
        sa.select(pi.ParcelID, pi.InputID)
        .where(pi.ParcelID.in_(parcel_ids))
        .order_by(pi.ParcelID, pi.InputID)
    )
    found: dict[bytes, list[bytes]] = {}
    for parcel_id, input_id in rows:
        found.setdefault(bytes(parcel_id), []).append(bytes(input_id))
    return found
