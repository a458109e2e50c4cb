"""SQL of user parcels: the three rows of a submitted job, and reading them back."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.errors import FailedPrecondition
from dxts.core.schema.execution import compute_parcels, parcels, user_parcels
from dxts.core.states import Kind, ParcelStatus
from dxts.execution.records import (
    Annotated,
    ComputeFacet,
    ParcelRecord,
    Submitter,
    UserParcelRecord,
)
from dxts.execution.store import handles


async def insert_user_parcel(
    conn: AsyncConnection,
    parcel_id: bytes,
    owner: Submitter,
    annotations: dict[str, Any] | None,
    facet: ComputeFacet,
    now: datetime,
) -> None:
    """Parcels, UserParcels and ComputeParcels rows of one user job, the parcel Unassigned
    (user parcels are not counted: they have no transformation). FailedPrecondition when the
    job's process or requirements are not stored: the facet's foreign keys refuse it."""
    try:
        await conn.execute(
            sa.insert(parcels).values(
                ParcelID=parcel_id,
                TransformationID=None,
                Kind=Kind.COMPUTE,
                Status=ParcelStatus.UNASSIGNED,
                Annotations=annotations,
                UpdatedAt=now,
            )
        )
        await handles.mint(conn, [parcel_id])
        await conn.execute(
            sa.insert(user_parcels).values(ParcelID=parcel_id, VO=owner.vo, Sub=owner.sub)
        )
        await conn.execute(
            sa.insert(compute_parcels).values(
                ParcelID=parcel_id,
                ProcessID=facet.process_id,
                RequirementsID=facet.requirements_id,
                Parameters=facet.parameters,
            )
        )
    except sa.exc.IntegrityError as error:
        raise FailedPrecondition(
            "the job's process or requirements are not stored (definition stores them first)"
        ) from error


async def recent_parcel_annotations(
    conn: AsyncConnection, vo: str, sub: str, since: bytes
) -> list[Annotated]:
    """(ParcelID, Annotations) of the submitter's parcels with an id from `since` on: a range
    of the (VO, Sub) index, whose entries end with the ParcelID."""
    rows = await conn.execute(
        sa.select(parcels.c.ParcelID, parcels.c.Annotations)
        .select_from(user_parcels.join(parcels, parcels.c.ParcelID == user_parcels.c.ParcelID))
        .where(
            user_parcels.c["VO"] == vo,
            user_parcels.c.Sub == sub,
            user_parcels.c.ParcelID >= since,
        )
    )
    return [Annotated(bytes(row.ParcelID), row.Annotations) for row in rows]


async def user_parcel(conn: AsyncConnection, parcel_id: bytes) -> UserParcelRecord | None:
    """The parcel with its submitter and its compute facet; None if it is no user parcel."""
    row = (
        await conn.execute(
            sa.select(
                parcels,
                user_parcels.c.VO,
                user_parcels.c.Sub,
                compute_parcels.c.ProcessID,
                compute_parcels.c.RequirementsID,
                compute_parcels.c.ResolvedHintsID,
                compute_parcels.c.Parameters,
            )
            .select_from(
                parcels.join(user_parcels, user_parcels.c.ParcelID == parcels.c.ParcelID).outerjoin(
                    compute_parcels, compute_parcels.c.ParcelID == parcels.c.ParcelID
                )
            )
            .where(parcels.c.ParcelID == parcel_id)
        )
    ).one_or_none()
    if row is None:
        return None
    return UserParcelRecord(
        parcel=ParcelRecord.of(row),
        submitter=Submitter(row.VO, row.Sub),
        compute=ComputeFacet.of(row) if row.ProcessID is not None else None,
    )
