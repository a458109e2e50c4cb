"""Rows every benchmark seeds the same way (untimed): the definition side a benchmark's inputs
and parcels belong to, and the trivial process its compute parcels run."""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.ids import new_id, new_ids
from dxts.core.schema import definition
from dxts.core.states import Kind, TransformationStatus

# The process a benchmark's compute parcels run: nothing runs it, it only has to be stored.
TRIVIAL_TOOL = {
    "class": "CommandLineTool",
    "cwlVersion": "v1.2",
    "baseCommand": "true",
    "inputs": {},
    "outputs": {},
}


def utc_now() -> datetime:
    """Now in UTC, naive, as the schema's DATETIME(6) columns hold it."""
    return datetime.now(UTC).replace(tzinfo=None)


async def insert_transformations(
    conn: AsyncConnection, count: int = 1, *, packer: str = "bench", feeder: str | None = None
) -> list[bytes]:
    """`count` Active compute transformations under one new Ownership, as definition would
    have stored them, in the caller's transaction; returns their ids."""
    ownership_id, ids = new_id(), new_ids(count)
    await conn.execute(
        sa.insert(definition.ownership).values(OwnershipID=ownership_id, VO="bench", Sub="b")
    )
    await conn.execute(
        sa.insert(definition.transformations),
        [
            {
                "TransformationID": tid,
                "OwnershipID": ownership_id,
                "Type": "Bench",
                "Kind": Kind.COMPUTE.value,
                "Status": TransformationStatus.ACTIVE.value,
                "Feeder": feeder,
                "Packer": packer,
                "UpdatedAt": utc_now(),
            }
            for tid in ids
        ],
    )
    return ids
