"""What the lifecycle sweep has work for: one read listing the owners in the states it handles."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.schema.definition import ownership, transformations, workgraphs
from dxts.core.states import TransformationStatus, WorkgraphStatus

W, T = WorkgraphStatus, TransformationStatus
SWEPT_WORKGRAPHS = (
    W.SCOUTING,
    W.APPROVING,
    W.ACTIVE,
    W.FINALIZING,
    W.COMPLETED,
    W.ARCHIVING,
    W.CANCELLING,
)


SWEPT_STANDALONE = (T.ACTIVE, T.FINALIZING, T.ARCHIVING, T.CANCELLING)


async def sweepable(conn: AsyncConnection) -> tuple[list[bytes], list[bytes]]:
    """(workgraph ids, standalone transformation ids) the engine has work for, in id order."""
    wids = await conn.execute(
        sa.select(workgraphs.c.WorkgraphID)
        .where(workgraphs.c.Status.in_(SWEPT_WORKGRAPHS))
        .order_by(workgraphs.c.WorkgraphID)
    )
    tids = await conn.execute(
        sa.select(transformations.c.TransformationID)
        .join(ownership, ownership.c.OwnershipID == transformations.c.OwnershipID)
        .where(ownership.c.WorkgraphID.is_(None), transformations.c.Status.in_(SWEPT_STANDALONE))
        .order_by(transformations.c.TransformationID)
    )
    return [bytes(w) for (w,) in wids], [bytes(t) for (t,) in tids]
