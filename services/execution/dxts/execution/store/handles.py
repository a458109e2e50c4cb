"""SQL of parcel handles (`p-10293`): minted in the statement style of the parcels they name
(one multi-row INSERT per batch), read by id or by number, each an index probe (see
`dxts.core.schema.handles`). Cleaning deletes them with the parcels (a table hanging off
Parcels)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.bulk import insert_rows
from dxts.core.schema.execution import parcels
from dxts.core.schema.handles import parcel_handles


async def mint(conn: AsyncConnection, parcel_ids: Sequence[bytes]) -> None:
    """Number new parcels, in the order given, in one statement."""
    await insert_rows(conn, parcel_handles, [{"ParcelID": p} for p in parcel_ids])


async def numbers(conn: AsyncConnection, parcel_ids: Iterable[bytes]) -> dict[bytes, int]:
    wanted = list(parcel_ids)
    if not wanted:
        return {}
    rows = await conn.execute(
        sa.select(parcel_handles.c.ParcelID, parcel_handles.c.Number).where(
            parcel_handles.c.ParcelID.in_(wanted)
        )
    )
    return {bytes(i): int(n) for i, n in rows}


async def parcel_of_number(conn: AsyncConnection, number: int) -> bytes | None:
    found = await conn.scalar(
        sa.select(parcel_handles.c.ParcelID).where(parcel_handles.c.Number == number)
    )
    return bytes(found) if found is not None else None


async def ids_in_range(
    conn: AsyncConnection, low: bytes, high: bytes, *, limit: int
) -> list[bytes]:
    """Parcel ids between `low` and `high` (an id prefix's range), a range scan of the key."""
    rows = await conn.execute(
        sa.select(parcels.c.ParcelID)
        .where(parcels.c.ParcelID.between(low, high))
        .order_by(parcels.c.ParcelID)
        .limit(limit)
    )
    return [bytes(i) for (i,) in rows]
