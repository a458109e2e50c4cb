"""SQL of GroupFailures: the failed parcels of some transformations counted in the database by
what a failure is grouped on (class, backend, site, own words, exit code, transformation),
each group's first and last failure and its latest parcel; the words, class and site taken out
of `Annotations` by the database (JSON paths), so no parcel's whole annotations leave it. Then
the latest parcels of a few such groups and the inputs of the examples shown. One statement
each, on the (TransformationID, Status) index and ParcelInputs' primary key."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.schema.execution import parcel_inputs, parcels
from dxts.core.states import ParcelStatus

_OUTCOME = ("outcome",)
_FAILURE = ("outcome", "failure")


def failed_at() -> sa.ColumnElement[datetime]:
    """When a parcel failed: its completion, else its last update."""
    return sa.func.coalesce(parcels.c.CompletedAt, parcels.c.UpdatedAt)


def _text(*path: str) -> sa.ColumnElement[Any]:
    return parcels.c.Annotations[path].as_string()


def _words() -> sa.ColumnElement[Any]:
    """A failed parcel's own words: the tool's line, else the backend's message, else the
    reason execution recorded (empty strings read as absent, as `failure_groups` reads them)."""
    return sa.func.coalesce(
        sa.func.nullif(_text(*_FAILURE, "tool_message"), ""),
        sa.func.nullif(_text(*_OUTCOME, "message"), ""),
        sa.func.nullif(_text("reason"), ""),
        "",
    )


def _key() -> dict[str, sa.ColumnElement[Any]]:
    """What failures are counted by, by name."""
    return {
        "TransformationID": parcels.c.TransformationID,
        "Backend": parcels.c.Backend,
        "failure_class": sa.func.coalesce(_text(*_FAILURE, "class"), ""),
        "site": sa.func.coalesce(_text(*_FAILURE, "site"), ""),
        "words": _words(),
        "exit_code": parcels.c.Annotations[(*_OUTCOME, "exit_code")].as_integer(),
    }


@dataclass(frozen=True)
class Counted:
    """Failed parcels alike word for word: how many, when, and the latest one."""

    transformation_id: bytes
    backend: str
    failure_class: str
    site: str
    words: str
    exit_code: int | None
    count: int
    first_seen: datetime
    last_seen: datetime
    latest: bytes  # the greatest ParcelID (UUIDv7: the last created)


def _conditions(
    transformation_ids: Sequence[bytes], since: datetime | None
) -> list[sa.ColumnElement[bool]]:
    c = parcels.c
    found = [c.TransformationID.in_(transformation_ids), c.Status == ParcelStatus.FAILED]
    if since is not None:
        found.append(failed_at() >= since)
    return found


async def counted_failures(
    conn: AsyncConnection,
    transformation_ids: Sequence[bytes],
    since: datetime | None,
    limit: int,
) -> list[Counted]:
    """The failed parcels counted by what they are grouped on, the largest first, at most
    `limit` such counts."""
    key = list(_key().values())
    count = sa.func.count().label("n")
    rows = await conn.execute(
        sa.select(
            *(expression.label(name) for name, expression in _key().items()),
            count,
            sa.func.min(failed_at()).label("first_seen"),
            sa.func.max(failed_at()).label("last_seen"),
            sa.func.max(parcels.c.ParcelID).label("latest"),
        )
        .where(*_conditions(transformation_ids, since))
        .group_by(*key)
        .order_by(count.desc())
        .limit(limit)
    )
    return [
        Counted(
            bytes(r.TransformationID),
            r.Backend or "",
            r.failure_class,
            r.site,
            r.words,
            r.exit_code if isinstance(r.exit_code, int) else None,
            r.n,
            r.first_seen,
            r.last_seen,
            bytes(r.latest),
        )
        for r in rows
    ]


async def latest_failed(
    conn: AsyncConnection,
    transformation_ids: Sequence[bytes],
    since: datetime | None,
    alike: Counted,
    limit: int,
) -> list[bytes]:
    """The latest failed parcels counted in `alike` (its transformation and key), at most
    `limit`."""
    key = _key()
    rows = await conn.execute(
        sa.select(parcels.c.ParcelID)
        .where(
            *_conditions([alike.transformation_id], since),
            sa.func.coalesce(key["Backend"], "") == alike.backend,
            key["failure_class"] == alike.failure_class,
            key["site"] == alike.site,
            key["words"] == alike.words,
        )
        .order_by(failed_at().desc(), parcels.c.ParcelID)
        .limit(limit)
    )
    return [bytes(r.ParcelID) for r in rows]


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
