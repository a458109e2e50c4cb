"""SQL of the HandleFailedInput sweep: the Failed inputs of a transformation with their last
parcel, and locking those still Failed before a decision is applied."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.schema.execution import inputs, parcels
from dxts.core.states import InputStatus
from dxts.execution.store.common import chunked


async def failed_page(
    conn: AsyncConnection, transformation_id: bytes, *, after: bytes | None, limit: int
) -> list[Any]:
    """Failed inputs in key order after `after` ((TransformationID, Status) index), each with
    its last parcel's Kind, Status, Backend and Annotations (None when it has none)."""
    i, p = inputs.c, parcels.c
    condition = [i.TransformationID == transformation_id, i.Status == InputStatus.FAILED]
    if after is not None:
        condition.append(i.InputID > after)
    rows = await conn.execute(
        sa.select(
            i.InputID,
            i.ParentInputID,
            i.LFN,
            i.LFNSize,
            i.Descriptor,
            i.ErrorCount,
            i.LastParcelID,
            p.Kind,
            p.Status.label("ParcelStatus"),
            p.Backend,
            p.Annotations,
        )
        .select_from(inputs.outerjoin(parcels, p.ParcelID == i.LastParcelID))
        .where(*condition)
        .order_by(i.InputID)
        .limit(limit)
    )
    return list(rows)


async def lock_failed(
    conn: AsyncConnection, transformation_id: bytes, input_ids: Sequence[bytes]
) -> dict[bytes, int]:
    """The inputs among `input_ids` still Failed, locked: InputID → ErrorCount."""
    found: dict[bytes, int] = {}
    for chunk in chunked(sorted(set(input_ids))):
        rows = await conn.execute(
            sa.select(inputs.c.InputID, inputs.c.ErrorCount)
            .where(
                inputs.c.TransformationID == transformation_id,
                inputs.c.InputID.in_(chunk),
                inputs.c.Status == InputStatus.FAILED,
            )
            .with_for_update()
        )
        found.update((bytes(row.InputID), row.ErrorCount) for row in rows)
    return found
