"""SQL of the `after` wait: what became of files in the transformations a member waits on.

What became of a file in a consumer is a lookup of its LFN in the consumer's Inputs, whose
(TransformationID, LFN) index exists for it. One statement per chunk of LFNs
for every consumer at once: `TransformationID IN (...) AND LFN IN (...)` is a set of ranges of
that index.

The packer's review of what it set aside (`logic.after_review`) reads the same index, with each
copy's UpdatedAt, for the Problematic inputs it finds through (TransformationID, Status).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.schema.execution import inputs
from dxts.core.states import InputStatus
from dxts.execution.store.common import chunked


async def consumed(
    conn: AsyncConnection, lfns: Sequence[str], consumers: Sequence[bytes]
) -> dict[bytes, dict[str, list[InputStatus]]]:
    """Consumer → LFN → the statuses of its Inputs rows for that LFN (absent: never fed)."""
    found: dict[bytes, dict[str, list[InputStatus]]] = {c: {} for c in consumers}
    if not consumers:
        return found
    for names in chunked(sorted(set(lfns))):
        rows = await conn.execute(
            sa.select(inputs.c.TransformationID, inputs.c.LFN, inputs.c.Status).where(
                inputs.c.TransformationID.in_(list(consumers)), inputs.c.LFN.in_(names)
            )
        )
        for r in rows:
            files = found[bytes(r.TransformationID)]
            files.setdefault(r.LFN, []).append(InputStatus(r.Status))
    return found


class SetAside(NamedTuple):
    """An input the packer set aside: its id, its file and when it was set aside."""

    input_id: bytes
    lfn: str
    updated_at: datetime


async def set_aside(
    conn: AsyncConnection, transformation_id: bytes, *, after: bytes | None, limit: int
) -> list[SetAside]:
    """Up to `limit` Problematic inputs with an LFN that were never in a parcel (the packer set
    them aside), in key order after `after`, through the (TransformationID, Status) index."""
    conditions = [
        inputs.c.TransformationID == transformation_id,
        inputs.c.Status == InputStatus.PROBLEMATIC.value,
        inputs.c.LFN.is_not(None),
        inputs.c.LastParcelID.is_(None),
    ]
    if after is not None:
        conditions.append(inputs.c.InputID > after)
    rows = await conn.execute(
        sa.select(inputs.c.InputID, inputs.c.LFN, inputs.c.UpdatedAt)
        .where(*conditions)
        .order_by(inputs.c.InputID)
        .limit(limit)
    )
    return [SetAside(bytes(r.InputID), r.LFN, r.UpdatedAt) for r in rows]


async def consumer_copies(
    conn: AsyncConnection, lfns: Sequence[str], consumers: Sequence[bytes]
) -> dict[str, list[tuple[bytes, InputStatus, datetime]]]:
    """LFN → every consumer's Inputs row for it: (consumer, status, UpdatedAt)."""
    found: dict[str, list[tuple[bytes, InputStatus, datetime]]] = {}
    for names in chunked(sorted(set(lfns))):
        rows = await conn.execute(
            sa.select(
                inputs.c.TransformationID, inputs.c.LFN, inputs.c.Status, inputs.c.UpdatedAt
            ).where(inputs.c.TransformationID.in_(list(consumers)), inputs.c.LFN.in_(names))
        )
        for r in rows:
            found.setdefault(r.LFN, []).append(
                (bytes(r.TransformationID), InputStatus(r.Status), r.UpdatedAt)
            )
    return found
