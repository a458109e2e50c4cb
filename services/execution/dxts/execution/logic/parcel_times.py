"""CountParcelsOverTime: a transformation's parcels in flight, done and failed over time, as
far as the rows record it. A parcel's creation is its id's time (a UUIDv7, to the
millisecond) and its end its CompletedAt; no per-status time is kept, so "in flight" means
created and not yet ended, waiting for a backend included. The database counts the parcels by
status and by the span each moment falls in (`store.parcel_times`, one statement, no JSON
read); the running sums are made here."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from dxts.core.db import Database, Isolation, db_now
from dxts.core.states import ParcelStatus
from dxts.execution.store import parcel_times as db

MAX_BUCKETS = 96
DONE = frozenset({ParcelStatus.DONE, ParcelStatus.PARTIALLY_DONE})
_EPOCH = datetime(1970, 1, 1)
_MILLISECOND = timedelta(milliseconds=1)


@dataclass(frozen=True)
class OverTime:
    start: datetime | None  # naive UTC; None: no parcel
    end: datetime | None
    in_flight: list[int] = field(default_factory=list)  # at each span's end
    done: list[int] = field(default_factory=list)  # ended Done or PartiallyDone in each span
    failed: list[int] = field(default_factory=list)


def created_at(parcel_id: bytes) -> datetime:
    """When an id was minted: its first 48 bits, milliseconds since the epoch (UUIDv7)."""
    return _EPOCH + int.from_bytes(parcel_id[:6], "big") * _MILLISECOND


def first_id_at(moment: datetime) -> bytes:
    """The smallest UUIDv7 minted at or after `moment` (naive UTC), to the millisecond above."""
    millis = -(-(moment - _EPOCH) // _MILLISECOND)
    return millis.to_bytes(6, "big") + bytes(10)


async def parcels_over_time(database: Database, transformation_id: bytes, buckets: int) -> OverTime:
    """The transformation's parcels in `buckets` equal spans from its first parcel's creation
    to its last end (to now while any has not ended); one snapshot."""
    async with database.transaction(Isolation.REPEATABLE_READ) as conn:
        now = (await db_now(conn)).replace(tzinfo=None)
        extent = await db.extent(conn, transformation_id)
        if extent.first_id is None:
            return OverTime(None, None)
        start = created_at(extent.first_id)
        end = now if extent.open or extent.last_end is None else extent.last_end
        end = max(end, start + _MILLISECOND)
        width = (end - start) / buckets
        bounds = [start + width * n for n in range(1, buckets)]
        rows = await db.counted_by_span(
            conn, transformation_id, [first_id_at(b) for b in bounds], bounds
        )
    found = OverTime(start, end, [0] * buckets, [0] * buckets, [0] * buckets)
    started = [0] * buckets  # created in each span
    ended = [0] * buckets  # ended in each span (Cancelled too)
    for row in rows:
        created = min(row.created, buckets - 1)
        started[created] += row.parcels
        if row.ended is None:
            continue
        span = min(row.ended, buckets - 1)
        ended[span] += row.parcels
        if row.status in DONE:
            found.done[span] += row.parcels
        elif row.status == ParcelStatus.FAILED:
            found.failed[span] += row.parcels
    flying = 0
    for n in range(buckets):
        flying += started[n] - ended[n]
        found.in_flight[n] = flying
    return found
