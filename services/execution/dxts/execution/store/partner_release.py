"""SQL of the release of the sets a joining packer withheld for a partner that has since been
made (`dxts.execution.logic.partner_release`): from the partner files recorded after a point,
back to the driving files made from the same sources, to the member's withheld inputs on them.

Each step is an indexed read, a chunk of ids or LFNs at a time: the partner output's files after
an OutputID (its primary key), their parcels' source files (ParcelInputs by parcel, Inputs by
key), the driving producer's inputs on those sources ((TransformationID, LFN)) and what their
last parcels made under the driving output ((ParcelID)), and the member's Unassigned inputs on
those files ((TransformationID, LFN)), whose DelayedUntil is cleared in the same statement.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.db import utcnow
from dxts.core.schema.definition import transformation_outputs
from dxts.core.schema.execution import inputs, parcel_inputs, parcel_outputs, parcels
from dxts.core.states import InputStatus
from dxts.execution.store.common import chunked

UNASSIGNED = InputStatus.UNASSIGNED.value


async def newest_output(conn: AsyncConnection, output_id: bytes) -> bytes | None:
    """The largest OutputID recorded under the output (a UUIDv7: its newest file)."""
    found = await conn.scalar(
        sa.select(sa.func.max(parcel_outputs.c.OutputID)).where(
            parcel_outputs.c.TransformationOutputID == output_id
        )
    )
    return bytes(found) if found is not None else None


async def producer(conn: AsyncConnection, output_id: bytes) -> bytes | None:
    """The transformation declaring the output, Active or not (the driving side may have
    ended before its partner)."""
    found = await conn.scalar(
        sa.select(transformation_outputs.c.TransformationID).where(
            transformation_outputs.c.TransformationOutputID == output_id
        )
    )
    return bytes(found) if found is not None else None


async def oldest_withheld(conn: AsyncConnection, transformation_id: bytes) -> datetime | None:
    """When the longest-withheld of the member's withheld inputs was withheld (UpdatedAt)."""
    c = inputs.c
    return await conn.scalar(
        sa.select(sa.func.min(c.UpdatedAt)).where(
            c.TransformationID == transformation_id,
            c.Status == UNASSIGNED,
            c.DelayedUntil > utcnow(),  # the claim's clock (`packing.claim_chunk`)
        )
    )


async def sources_made_after(conn: AsyncConnection, output_id: bytes, floor: bytes) -> list[str]:
    """The source files of the parcels that recorded a file under the output from `floor` on
    (an OutputID)."""
    made = sorted(
        {
            bytes(r.ParcelID)
            for r in await conn.execute(
                sa.select(parcel_outputs.c.ParcelID).where(
                    parcel_outputs.c.TransformationOutputID == output_id,
                    parcel_outputs.c.OutputID >= floor,
                )
            )
        }
    )
    found: set[str] = set()
    for chunk in chunked(made):
        rows = await conn.execute(
            sa.select(inputs.c.LFN)
            .select_from(
                parcels.join(
                    parcel_inputs,
                    sa.and_(
                        parcel_inputs.c.TransformationID == parcels.c.TransformationID,
                        parcel_inputs.c.ParcelID == parcels.c.ParcelID,
                    ),
                ).join(
                    inputs,
                    sa.and_(
                        inputs.c.TransformationID == parcel_inputs.c.TransformationID,
                        inputs.c.InputID == parcel_inputs.c.InputID,
                    ),
                )
            )
            .where(parcels.c.ParcelID.in_(chunk), inputs.c.LFN.is_not(None))
        )
        found.update(r.LFN for r in rows)
    return sorted(found)


async def made_from(
    conn: AsyncConnection, producer_id: bytes, output_id: bytes, sources: Sequence[str]
) -> list[str]:
    """The files the producer's last parcel on each source recorded under the output."""
    last: set[bytes] = set()
    for names in chunked(list(sources)):
        rows = await conn.execute(
            sa.select(inputs.c.LastParcelID).where(
                inputs.c.TransformationID == producer_id,
                inputs.c.LFN.in_(names),
                inputs.c.LastParcelID.is_not(None),
            )
        )
        last.update(bytes(r.LastParcelID) for r in rows)
    found: set[str] = set()
    for chunk in chunked(sorted(last)):
        rows = await conn.execute(
            sa.select(parcel_outputs.c.LFN).where(
                parcel_outputs.c.ParcelID.in_(chunk),
                parcel_outputs.c.TransformationOutputID == output_id,
            )
        )
        found.update(r.LFN for r in rows)
    return sorted(found)


async def release(
    conn: AsyncConnection, transformation_id: bytes, lfns: Sequence[str], now: datetime
) -> int:
    """Clear DelayedUntil on the member's withheld inputs on these files; how many."""
    c = inputs.c
    released = 0
    for names in chunked(list(lfns)):
        result = await conn.execute(
            sa.update(inputs)
            .where(
                c.TransformationID == transformation_id,
                c.LFN.in_(names),
                c.Status == UNASSIGNED,
                c.DelayedUntil > utcnow(),
            )
            .values(DelayedUntil=None, UpdatedAt=now)
        )
        released += int(result.rowcount)
    return released
