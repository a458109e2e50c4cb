"""SQL of splitting a parcel's inputs: the children's rows and the born-Done recovery parcels
that claim the parts already done, written in the recording transaction of the split parcel.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.bulk import insert_rows
from dxts.core.counters import journal_inputs
from dxts.core.schema.execution import (
    INPUTS_BY_HASH,
    compute_parcels,
    directed_parcels,
    inputs,
    parcel_inputs,
    parcels,
)
from dxts.core.states import ParcelStatus
from dxts.execution.store import handles
from dxts.execution.store.common import chunked
from dxts.execution.store.outcomes import ParcelRow, journal_parcel_moves


async def existing_hashes(
    conn: AsyncConnection, transformation_id: bytes, hashes: Sequence[bytes]
) -> set[bytes]:
    """The input hashes among `hashes` the transformation already has (its unique key)."""
    found: set[bytes] = set()
    for chunk in chunked(sorted(set(hashes))):
        rows = await conn.execute(
            sa.select(inputs.c.InputHash)
            .with_hint(inputs, INPUTS_BY_HASH, "mysql")
            .where(inputs.c.TransformationID == transformation_id, inputs.c.InputHash.in_(chunk))
        )
        found.update(bytes(h) for h in rows.scalars())
    return found


async def insert_inputs(conn: AsyncConnection, rows: Sequence[Mapping[str, Any]]) -> None:
    """New input rows (split children), journalled as creations in their status."""
    if not rows:
        return
    await insert_rows(conn, inputs, rows)
    counts: dict[tuple[bytes, str | None, str | None], int] = defaultdict(int)
    for row in rows:
        counts[(row["TransformationID"], None, row["Status"])] += 1
    await journal_inputs(conn, counts)


async def compute_facets(
    conn: AsyncConnection, parcel_ids: Sequence[bytes]
) -> dict[bytes, tuple[bytes, bytes | None]]:
    """ParcelID → (ProcessID, RequirementsID) of compute parcels."""
    c = compute_parcels.c
    found = {}
    for chunk in chunked(sorted(set(parcel_ids))):
        rows = await conn.execute(
            sa.select(c.ParcelID, c.ProcessID, c.RequirementsID).where(c.ParcelID.in_(chunk))
        )
        for row in rows:
            found[bytes(row.ParcelID)] = (
                bytes(row.ProcessID),
                bytes(row.RequirementsID) if row.RequirementsID else None,
            )
    return found


@dataclass(frozen=True)
class RecoveryParcel:
    """A born-Done recovery parcel claiming the SUCCESS split portions of `recovers`, directed
    to `backend`, with the compute facet it copies from it (None for a data parcel): what ran,
    with which requirements. The sidecar the dispatcher resolved for `recovers` is not copied
    (ComputeParcels.ResolvedHintsID is the dispatcher's): it is read through `recovery_of`."""

    parcel_id: bytes
    recovers: ParcelRow
    backend: str
    annotations: dict[str, Any]
    facet: tuple[bytes, bytes | None] | None  # compute_facets' pair


async def insert_born_done_parcels(
    conn: AsyncConnection, recovered: Sequence[RecoveryParcel], now: datetime
) -> None:
    """Recovery parcels (born Done, never submitted) with their compute facets, journalled as
    creations in Done."""
    if not recovered:
        return
    rows = [
        {
            "ParcelID": r.parcel_id,
            "TransformationID": r.recovers.transformation_id,
            "Kind": r.recovers.kind,
            "Status": ParcelStatus.DONE,
            "Annotations": r.annotations,
            "UpdatedAt": now,
            "CompletedAt": now,
        }
        for r in recovered
    ]
    facets = [
        {
            "ParcelID": r.parcel_id,
            "ProcessID": r.facet[0],
            "RequirementsID": r.facet[1],
            "Parameters": None,
        }
        for r in recovered
        if r.facet is not None
    ]
    await insert_rows(conn, parcels, rows)
    await insert_rows(
        conn, directed_parcels, [{"ParcelID": r.parcel_id, "Backend": r.backend} for r in recovered]
    )
    await handles.mint(conn, [r.parcel_id for r in recovered])
    await insert_rows(conn, compute_parcels, facets)
    await journal_parcel_moves(
        conn,
        [
            (
                ParcelRow(r.parcel_id, r.recovers.transformation_id, r.recovers.kind, "", None, {}),
                None,
                ParcelStatus.DONE,
            )
            for r in recovered
        ],
    )


async def insert_parcel_inputs(conn: AsyncConnection, links: Sequence[Mapping[str, Any]]) -> None:
    await insert_rows(conn, parcel_inputs, links)
