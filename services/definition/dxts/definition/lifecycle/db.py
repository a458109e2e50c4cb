"""The SQL the lifecycle engine adds to the definition service's own (`dxts.definition.db`).

Everything here touches definition-side tables only; execution's rows and the counters are
read over gRPC. Each function runs in the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.schema.definition import (
    actions,
    compute_transformations,
    ownership,
    requirements,
    transformations,
    workgraphs,
)
from dxts.core.states import ActionResult, TransformationStatus, WorkgraphStatus

W, T = WorkgraphStatus, TransformationStatus
# States in which the engine has work: hooks, action lists, the drain guard, the archive delay.
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


async def list_actions(
    conn: AsyncConnection,
    state: str,
    *,
    workgraph_id: bytes | None = None,
    transformation_ids: Iterable[bytes] = (),
) -> list[Any]:
    """The owners' actions of one list, by owner and position."""
    owners = []
    if workgraph_id is not None:
        owners.append(actions.c.WorkgraphID == workgraph_id)
    wanted = list(transformation_ids)
    if wanted:
        owners.append(actions.c.TransformationID.in_(wanted))
    if not owners:
        return []
    result = await conn.execute(
        sa.select(actions)
        .where(sa.or_(*owners), actions.c.State == state)
        .order_by(actions.c.TransformationID, actions.c.Position)
    )
    return list(result.all())


async def record_result(
    conn: AsyncConnection,
    action_id: int,
    *,
    seen: str | None,
    result: ActionResult,
    message: str | None,
    now: datetime,
) -> int:
    """The runner's one UPDATE of an action: result, message and time, only if the row still
    holds the result the runner saw (an operator may have forced or reset it meanwhile)."""
    still = actions.c.Result.is_(None) if seen is None else actions.c.Result == seen
    outcome = await conn.execute(
        sa.update(actions)
        .where(actions.c.ActionID == action_id, still)
        .values(Result=result.value, Message=message, Author=None, UpdatedAt=now)
    )
    return int(outcome.rowcount)


async def templates(conn: AsyncConnection, ids: Iterable[bytes]) -> dict[bytes, Any]:
    """TransformationID → its requirements template ({} when it has none), for compute
    transformations only."""
    wanted = list(set(ids))
    if not wanted:
        return {}
    result = await conn.execute(
        sa.select(compute_transformations.c.TransformationID, requirements.c.Requirements)
        .outerjoin(
            requirements,
            requirements.c.RequirementsID == compute_transformations.c.RequirementsTemplateID,
        )
        .where(compute_transformations.c.TransformationID.in_(wanted))
    )
    return {bytes(t): body if isinstance(body, dict) else {} for t, body in result}


async def set_template(conn: AsyncConnection, transformation_id: bytes, template_id: bytes) -> None:
    await conn.execute(
        sa.update(compute_transformations)
        .where(compute_transformations.c.TransformationID == transformation_id)
        .values(RequirementsTemplateID=template_id)
    )
