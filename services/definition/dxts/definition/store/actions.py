"""SQL of the Actions table: the action lists of workgraphs and transformations.

Every function runs in the caller's transaction. Entering a state clears its list's results
(`reset_actions`); the runner records a result with one conditional UPDATE (`record_result`);
an operator forces or resets one (`set_action_result`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.schema.definition import actions
from dxts.core.states import ActionResult


async def reset_actions(
    conn: AsyncConnection,
    *,
    state: str,
    now: datetime,
    workgraph_id: bytes | None = None,
    transformation_ids: Iterable[bytes] = (),
) -> int:
    """Result = NULL for the owners' actions of `state`: entering a state runs its list anew."""
    owners = []
    if workgraph_id is not None:
        owners.append(actions.c.WorkgraphID == workgraph_id)
    wanted = list(transformation_ids)
    if wanted:
        owners.append(actions.c.TransformationID.in_(wanted))
    if not owners:
        return 0
    result = await conn.execute(
        sa.update(actions)
        .where(sa.or_(*owners), actions.c.State == state)
        .values(Result=None, Message=None, Author=None, UpdatedAt=now)
    )
    return int(result.rowcount)


async def approving_count(conn: AsyncConnection, workgraph_id: bytes) -> int:
    return int(
        await conn.scalar(
            sa.select(sa.func.count())
            .select_from(actions)
            .where(actions.c.WorkgraphID == workgraph_id, actions.c.State == "Approving")
        )
        or 0
    )


@dataclass(frozen=True)
class ActionRecord:
    """One Actions row: an action of a workgraph's or a transformation's list for a state."""

    action_id: int
    workgraph_id: bytes | None
    transformation_id: bytes | None
    state: str
    position: int
    action: str
    args: Any  # the JSON arguments, as stored
    result: str | None
    message: str | None
    author: str | None
    updated_at: datetime | None

    @classmethod
    def of(cls, row: Any) -> ActionRecord:
        return cls(
            action_id=int(row.ActionID),
            workgraph_id=bytes(row.WorkgraphID) if row.WorkgraphID is not None else None,
            transformation_id=(
                bytes(row.TransformationID) if row.TransformationID is not None else None
            ),
            state=row.State,
            position=int(row.Position),
            action=row.Action,
            args=row.Args,
            result=row.Result,
            message=row.Message,
            author=row.Author,
            updated_at=row.UpdatedAt,
        )


async def lock_action(conn: AsyncConnection, action_id: int) -> ActionRecord | None:
    result = await conn.execute(
        sa.select(actions).where(actions.c.ActionID == action_id).with_for_update()
    )
    row = result.one_or_none()
    return ActionRecord.of(row) if row is not None else None


async def action_row(conn: AsyncConnection, action_id: int) -> ActionRecord | None:
    result = await conn.execute(sa.select(actions).where(actions.c.ActionID == action_id))
    row = result.one_or_none()
    return ActionRecord.of(row) if row is not None else None


async def set_action_result(
    conn: AsyncConnection,
    action_id: int,
    *,
    result: str | None,
    message: str | None,
    author: str | None,
    now: datetime,
) -> None:
    await conn.execute(
        sa.update(actions)
        .where(actions.c.ActionID == action_id)
        .values(Result=result, Message=message, Author=author, UpdatedAt=now)
    )


async def failed_actions(
    conn: AsyncConnection,
    *,
    state: str,
    workgraph_id: bytes | None,
    transformation_id: bytes | None,
) -> int:
    """How many of an owner's actions of `state` are Failed."""
    owner = (
        actions.c.WorkgraphID == workgraph_id
        if workgraph_id is not None
        else actions.c.TransformationID == transformation_id
    )
    return int(
        await conn.scalar(
            sa.select(sa.func.count())
            .select_from(actions)
            .where(owner, actions.c.State == state, actions.c.Result == "Failed")
        )
        or 0
    )


async def actions_of(
    conn: AsyncConnection,
    *,
    workgraph_id: bytes | None = None,
    transformation_ids: Iterable[bytes] = (),
    workgraph_ids: Iterable[bytes] = (),
    results: Iterable[str] | None = None,
) -> list[ActionRecord]:
    """Every action of the owners (with one of `results`, when given), by owner, list and
    position."""
    owners = []
    if workgraph_id is not None:
        owners.append(actions.c.WorkgraphID == workgraph_id)
    workgraphs = list(workgraph_ids)
    if workgraphs:
        owners.append(actions.c.WorkgraphID.in_(workgraphs))
    wanted = list(transformation_ids)
    if wanted:
        owners.append(actions.c.TransformationID.in_(wanted))
    if not owners:
        return []
    wanted_results = [] if results is None else [actions.c.Result.in_(list(results))]
    result = await conn.execute(
        sa.select(actions)
        .where(sa.or_(*owners), *wanted_results)
        .order_by(actions.c.TransformationID, actions.c.State, actions.c.Position)
    )
    return [ActionRecord.of(row) for row in result]


async def list_actions(
    conn: AsyncConnection,
    state: str,
    *,
    workgraph_id: bytes | None = None,
    transformation_ids: Iterable[bytes] = (),
) -> list[ActionRecord]:
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
    return [ActionRecord.of(row) for row in result]


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
