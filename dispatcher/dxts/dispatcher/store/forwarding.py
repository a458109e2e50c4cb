"""What the forwarding sweeps and the status read: a backend's Assigned parcels, its cancel
requests, and its load."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.db import db_now
from dxts.core.schema.execution import backend_ids, parcels
from dxts.dispatcher.store.identifiers import IDENTIFIER
from dxts.dispatcher.store.transitions import ASSIGNED, COMPLETING, RESERVED

# The Annotations key execution sets when it moves a Reserved or Assigned parcel to Completing
# for a cancellation (docs/dispatching.md): the dispatcher then asks the backend to cancel.
CANCEL_REQUESTED = "cancel_requested"


def _identified_by(adaptor: str) -> sa.ColumnElement[bool]:
    """A parcel's BackendIDs row, when an adaptor of type `adaptor` gave the identifier."""
    return sa.and_(backend_ids.c.ParcelID == parcels.c.ParcelID, backend_ids.c.Adaptor == adaptor)


async def assigned_page(
    conn: AsyncConnection, backend: str, adaptor: str, after: bytes | None, limit: int
) -> list[tuple[bytes, bytes]]:
    """(ParcelID, identifier) of the backend's Assigned parcels after `after`, in key order:
    the (Backend, Status) index, one page at a time."""
    query = (
        sa.select(parcels.c.ParcelID, IDENTIFIER)
        .join(backend_ids, _identified_by(adaptor))
        .where(parcels.c.Backend == backend, parcels.c.Status == ASSIGNED)
        .order_by(parcels.c.ParcelID)
        .limit(limit)
    )
    if after is not None:
        query = query.where(parcels.c.ParcelID > after)
    return [(bytes(row[0]), bytes(row[1])) for row in await conn.execute(query)]


@dataclass(frozen=True)
class CancelRequest:
    parcel_id: bytes
    identifier: bytes | None
    updated_at: datetime


async def cancel_requests(
    conn: AsyncConnection, backend: str, adaptor: str, page: int
) -> tuple[list[CancelRequest], datetime]:
    """The backend's Completing parcels that carry a cancel request, with their identifier
    when one is recorded; and the database clock, to age them against.

    Completing parcels are read page by page on the (Backend, Status) index and the request is
    read from Annotations here, rather than through a JSON predicate whose boolean semantics
    differ between MariaDB and SQLite. They are few when execution keeps up, but thousands
    while it catches up, each carrying its outcome: only those whose Annotations mention the
    request at all (a plain text match, the same on both) are fetched and decoded.
    """
    requests: list[CancelRequest] = []
    after: bytes | None = None
    while True:
        query = (
            sa.select(parcels.c.ParcelID, parcels.c.Annotations, parcels.c.UpdatedAt, IDENTIFIER)
            .select_from(parcels.outerjoin(backend_ids, _identified_by(adaptor)))
            .where(
                parcels.c.Backend == backend,
                parcels.c.Status == COMPLETING,
                sa.cast(parcels.c.Annotations, sa.String).like(f'%"{CANCEL_REQUESTED}"%'),
            )
            .order_by(parcels.c.ParcelID)
            .limit(page)
        )
        if after is not None:
            query = query.where(parcels.c.ParcelID > after)
        rows = (await conn.execute(query)).all()
        requests.extend(
            CancelRequest(bytes(row[0]), bytes(row[3]) if row[3] else None, row[2])
            for row in rows
            if isinstance(row[1], dict) and row[1].get(CANCEL_REQUESTED) is True
        )
        if len(rows) < page:
            return requests, await db_now(conn)
        after = bytes(rows[-1][0])


@dataclass(frozen=True)
class BackendLoad:
    reserved: int
    assigned: int
    oldest_reserved_at: datetime | None


async def backend_loads(
    conn: AsyncConnection, backends: Sequence[str]
) -> tuple[dict[str, BackendLoad], datetime]:
    """Per backend: parcels Reserved and Assigned to it, and its oldest reservation; with the
    database clock to age that against."""
    counts = {
        (row[0], row[1]): int(row[2])
        for row in await conn.execute(
            sa.select(parcels.c.Backend, parcels.c.Status, sa.func.count())
            .where(
                parcels.c.Backend.in_(list(backends)), parcels.c.Status.in_([RESERVED, ASSIGNED])
            )
            .group_by(parcels.c.Backend, parcels.c.Status)
        )
    }
    oldest = {
        row[0]: row[1]
        for row in await conn.execute(
            sa.select(parcels.c.Backend, sa.func.min(parcels.c.UpdatedAt))
            .where(parcels.c.Backend.in_(list(backends)), parcels.c.Status == RESERVED)
            .group_by(parcels.c.Backend)
        )
    }
    loads = {
        name: BackendLoad(
            counts.get((name, RESERVED), 0), counts.get((name, ASSIGNED), 0), oldest.get(name)
        )
        for name in backends
    }
    return loads, await db_now(conn)
