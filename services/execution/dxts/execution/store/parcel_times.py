"""SQL of CountParcelsOverTime: a transformation's parcels counted by status, by the span
their creation falls in and by the span their end falls in, in one statement. A parcel's
creation is its id (a UUIDv7, time-ordered), so the creation spans are ranges of ParcelID,
compared against the first possible id of each span's start: plain comparisons, the same SQL on
MariaDB and SQLite, and on the (TransformationID, Status) index's entries; the end is the row's
CompletedAt. A second statement gives the span to cover: the first id and the last end."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.schema.execution import parcels


@dataclass(frozen=True)
class Extent:
    """What a transformation's parcels span: its first parcel's id, the last end, and how
    many have not ended (none: None, None, 0)."""

    first_id: bytes | None
    last_end: datetime | None
    open: int


class SpanCount(NamedTuple):
    status: str
    created: int  # the span its creation falls in (len(bounds): at or after the last bound)
    ended: int | None  # the span its end falls in; None: not ended
    parcels: int


async def extent(conn: AsyncConnection, transformation_id: bytes) -> Extent:
    c = parcels.c
    row = (
        await conn.execute(
            sa.select(
                sa.func.min(c.ParcelID),
                sa.func.max(c.CompletedAt),
                sa.func.count() - sa.func.count(c.CompletedAt),
            ).where(c.TransformationID == transformation_id)
        )
    ).one()
    return Extent(bytes(row[0]) if row[0] is not None else None, row[1], int(row[2] or 0))


def _span(value: Any, bounds: Sequence[Any]) -> Any:
    """Which span `value` falls in: 0 below the first bound, n at or above the n-th."""
    if not bounds:
        return sa.literal(0)
    return sa.case(*((value < b, n) for n, b in enumerate(bounds)), else_=len(bounds))


async def counted_by_span(
    conn: AsyncConnection,
    transformation_id: bytes,
    created_bounds: Sequence[bytes],
    ended_bounds: Sequence[datetime],
) -> list[SpanCount]:
    """The transformation's parcels counted by status, creation span and end span; the bounds
    are each span's start after the first (the first id of that moment, and the moment)."""
    c = parcels.c
    created = _span(c.ParcelID, [sa.literal(b, c.ParcelID.type) for b in created_bounds])
    ended = sa.case(
        (c.CompletedAt.is_(None), sa.null()),
        else_=_span(c.CompletedAt, [sa.literal(b, c.CompletedAt.type) for b in ended_bounds]),
    )
    rows = await conn.execute(
        sa.select(c.Status, created.label("created"), ended.label("ended"), sa.func.count())
        .where(c.TransformationID == transformation_id)
        .group_by(c.Status, sa.literal_column("created"), sa.literal_column("ended"))
    )
    return [
        SpanCount(str(r[0]), int(r[1]), None if r[2] is None else int(r[2]), int(r[3]))
        for r in rows
    ]
