"""What the lifecycle sweep has work for: one read listing the owners in the states it handles."""

from __future__ import annotations

from typing import NamedTuple

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


class Sweepable(NamedTuple):
    """The owners the engine has work for, in id order, and how many of them are under way."""

    workgraphs: list[bytes]
    standalone: list[bytes]
    running: int  # owners other than Completed workgraphs (which only wait to be archived)


async def sweepable(conn: AsyncConnection) -> Sweepable:
    """What the lifecycle sweep has work for."""
    found = (
        await conn.execute(
            sa.select(workgraphs.c.WorkgraphID, workgraphs.c.Status)
            .where(workgraphs.c.Status.in_(SWEPT_WORKGRAPHS))
            .order_by(workgraphs.c.WorkgraphID)
        )
    ).all()
    tids = await conn.execute(
        sa.select(transformations.c.TransformationID)
        .join(ownership, ownership.c.OwnershipID == transformations.c.OwnershipID)
        .where(ownership.c.WorkgraphID.is_(None), transformations.c.Status.in_(SWEPT_STANDALONE))
        .order_by(transformations.c.TransformationID)
    )
    standalone = [bytes(t) for (t,) in tids]
    running = sum(status != W.COMPLETED for _, status in found) + len(standalone)
    return Sweepable([bytes(w) for w, _ in found], standalone, running)
