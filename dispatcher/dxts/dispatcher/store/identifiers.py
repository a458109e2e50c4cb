"""The backend identifier table (BackendIDs): ParcelID ↔ the identifier its adaptor gave it,
for every adaptor type alike, so that a new adaptor needs no change here."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.schema.execution import backend_ids, parcels, user_parcels
from dxts.core.states import ParcelStatus

IDENTIFIER = backend_ids.c.Identifier


@functools.cache
def insert_ignoring(dialect: str) -> sa.Insert:
    """The identifier table's INSERT that skips rows already there, per server dialect."""
    if dialect == "sqlite":
        return sqlite.insert(backend_ids).on_conflict_do_nothing()
    return sa.insert(backend_ids).prefix_with("IGNORE")


async def insert_identifiers(
    conn: AsyncConnection, adaptor: str, identifiers: Mapping[bytes, bytes]
) -> list[bytes]:
    """Record ParcelID → identifier rows, skipping ones already there; returns the parcels
    whose recorded identifier is not the given one (or that could not be recorded)."""
    if not identifiers:
        return []
    rows = [
        {"ParcelID": p, "Adaptor": adaptor, "Identifier": i} for p, i in sorted(identifiers.items())
    ]
    result = await conn.execute(insert_ignoring(conn.dialect.name), rows)
    if conn.dialect.supports_sane_multi_rowcount and result.rowcount == len(rows):
        return []  # every row is new: nothing can clash (the usual case, one statement less)
    recorded = {
        bytes(row[0]): bytes(row[1])
        for row in await conn.execute(
            sa.select(backend_ids.c.ParcelID, IDENTIFIER).where(
                backend_ids.c.ParcelID.in_(list(identifiers))
            )
        )
    }
    return [p for p, i in identifiers.items() if recorded.get(p) != i]


async def parcels_of_identifiers(
    conn: AsyncConnection, backend: str, adaptor: str, identifiers: Iterable[bytes]
) -> dict[bytes, bytes]:
    """identifier → ParcelID of the parcels `backend` holds, through the identifier table's
    unique index: an identifier of a parcel another backend (of the same adaptor type) holds is
    not found, so no backend reports on another's parcels."""
    wanted = sorted(set(identifiers))
    if not wanted:
        return {}
    rows = await conn.execute(
        sa.select(IDENTIFIER, backend_ids.c.ParcelID)
        .join(parcels, parcels.c.ParcelID == backend_ids.c.ParcelID)
        .where(
            backend_ids.c.Adaptor == adaptor,
            IDENTIFIER.in_(wanted),
            parcels.c.Backend == backend,
        )
    )
    return {bytes(row[0]): bytes(row[1]) for row in rows}


async def reserved_for(
    conn: AsyncConnection, backend: str, parcel_ids: Iterable[bytes]
) -> set[bytes]:
    """The parcels among `parcel_ids` Reserved for `backend`: submitted to it (or about to be),
    their identifiers not recorded yet."""
    wanted = sorted(set(parcel_ids))
    if not wanted:
        return set()
    rows = await conn.execute(
        sa.select(parcels.c.ParcelID).where(
            parcels.c.ParcelID.in_(wanted),
            parcels.c.Status == ParcelStatus.RESERVED.value,
            parcels.c.Backend == backend,
        )
    )
    return {bytes(row[0]) for row in rows}


@dataclass(frozen=True)
class ParcelPlace:
    """Where a parcel ran: its backend and the identifier it gave it, with what says whose
    parcel it is (its transformation, or a user parcel's VO)."""

    status: str
    backend: str | None
    identifier: bytes | None
    transformation_id: bytes | None
    user_vo: str | None


async def parcel_place(
    conn: AsyncConnection, parcel_id: bytes, adaptors: Mapping[str, str]
) -> ParcelPlace | None:
    """The parcel's backend and identifier (the identifier only for a backend of `adaptors`,
    backend name → adaptor type); None for a parcel that does not exist."""
    row = (
        await conn.execute(
            sa.select(
                parcels.c.Status, parcels.c.Backend, parcels.c.TransformationID, user_parcels.c.VO
            )
            .select_from(parcels.outerjoin(user_parcels))
            .where(parcels.c.ParcelID == parcel_id)
        )
    ).first()
    if row is None:
        return None
    identifier = None
    if row.Backend in adaptors:
        identifier = await conn.scalar(
            sa.select(IDENTIFIER).where(
                backend_ids.c.ParcelID == parcel_id,
                backend_ids.c.Adaptor == adaptors[row.Backend],
            )
        )
    return ParcelPlace(
        status=str(row.Status),
        backend=row.Backend,
        identifier=bytes(identifier) if identifier is not None else None,
        transformation_id=bytes(row.TransformationID) if row.TransformationID else None,
        user_vo=row.VO,
    )
