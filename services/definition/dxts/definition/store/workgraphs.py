"""SQL of workgraphs and their ownership rows: creation, the locking read every status
change starts with, status and annotation updates, and the reads of the queries.

Every function takes the caller's connection, so it runs inside whatever transaction the caller
opened; writes are one statement per batch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.db import db_now
from dxts.core.logs import STATE_CHANGE
from dxts.core.schema.accounting import workgraph_log
from dxts.core.schema.definition import (
    actions,
    compute_transformations,
    ownership,
    transformation_outputs,
    transformations,
    workgraphs,
)
from dxts.core.states import WorkgraphStatus
from dxts.definition.store import handles
from dxts.definition.store.transformations import STATE_COLUMNS, TransformationState, state_record


async def insert_workgraph(
    conn: AsyncConnection,
    *,
    workgraph: dict[str, Any],
    ownership_row: dict[str, Any],
    members: list[dict[str, Any]],
    compute: list[dict[str, Any]],
    outputs: list[dict[str, Any]],
    action_rows: list[dict[str, Any]],
) -> datetime:
    """A workgraph and every member row, in dependency order; returns the timestamp used."""
    now = await db_now(conn)
    await conn.execute(sa.insert(workgraphs).values({**workgraph, "UpdatedAt": now}))
    await conn.execute(sa.insert(ownership).values(ownership_row))
    # executemany form: one multi-row INSERT per table from the driver, without SQLAlchemy
    # compiling a bind parameter per cell (measured: half the cost of a 50-step submission).
    await conn.execute(sa.insert(transformations), [{**m, "UpdatedAt": now} for m in members])
    await handles.mint(conn, workgraph["WorkgraphID"], [m["TransformationID"] for m in members])
    if compute:
        await conn.execute(sa.insert(compute_transformations), compute)
    if outputs:
        await conn.execute(sa.insert(transformation_outputs), outputs)
    if action_rows:
        await conn.execute(
            sa.insert(actions),
            [{"WorkgraphID": None, "TransformationID": None, **a} for a in action_rows],
        )
    return now


async def count_owned(conn: AsyncConnection, vo: str, sub: str, statuses: Iterable[str]) -> int:
    """How many of the caller's workgraphs are in one of `statuses` (one statement, over the
    (VO, Sub) index of Ownership): the active-workgraphs quota."""
    o, w = ownership.c, workgraphs.c
    count = await conn.scalar(
        sa.select(sa.func.count())
        .select_from(ownership.join(workgraphs, w.WorkgraphID == o.WorkgraphID))
        .where(o["VO"] == vo, o.Sub == sub, w.Status.in_(list(statuses)))
    )
    return int(count or 0)


class EarlierSubmission(NamedTuple):
    """A workgraph created with a request id: its ids and its creation log row's data."""

    workgraph_id: bytes
    ownership_id: bytes
    data: Any  # the log row's JSON data, as stored


async def submissions_with_request(
    conn: AsyncConnection,
    vo: str,
    sub: str,
    request_id: str,
    *,
    since_id: bytes,
    lookback: int,
) -> list[EarlierSubmission]:
    """(WorkgraphID, OwnershipID, Data) of the creation log rows carrying `request_id` among the
    `lookback` newest workgraphs of (vo, sub) whose OwnershipID is at least `since_id`.

    Two statements, each bounded whatever the size of the tables: a backward range scan of at
    most `lookback` entries of the (VO, Sub) index, whose entries end with the time-ordered
    OwnershipID (minted with the workgraph); then those workgraphs' log rows through the
    (WorkgraphID, CreatedAt) index.
    """
    recent = await conn.execute(
        sa.select(ownership.c.WorkgraphID, ownership.c.OwnershipID)
        .where(
            ownership.c["VO"] == vo,
            ownership.c.Sub == sub,
            ownership.c.OwnershipID >= since_id,
            ownership.c.WorkgraphID.is_not(None),
        )
        .order_by(ownership.c.OwnershipID.desc())
        .limit(lookback)
    )
    owners = {bytes(row.WorkgraphID): bytes(row.OwnershipID) for row in recent}
    if not owners:
        return []
    log = workgraph_log.c
    result = await conn.execute(
        sa.select(log.WorkgraphID, log.Data)
        .where(
            log.WorkgraphID.in_(list(owners)),
            log.EventType == STATE_CHANGE,
            log.OldStatus.is_(None),
            log.Data["request_id"].as_string() == request_id,
        )
        .order_by(log.LogID)
    )
    return [EarlierSubmission(bytes(wid), owners[bytes(wid)], data) for wid, data in result]


async def started_at(
    conn: AsyncConnection, workgraph_ids: Iterable[bytes]
) -> dict[bytes, datetime]:
    """WorkgraphID → when it was started: its log's first move out of New to Scouting or Active
    (one grouped read on the log's (WorkgraphID, CreatedAt) index); absent while it was not."""
    wanted = list(workgraph_ids)
    if not wanted:
        return {}
    log = workgraph_log.c
    rows = await conn.execute(
        sa.select(log.WorkgraphID, sa.func.min(log.CreatedAt).label("started"))
        .where(
            log.WorkgraphID.in_(wanted),
            log.EventType == STATE_CHANGE,
            log.OldStatus == WorkgraphStatus.NEW.value,
            log.NewStatus.in_([WorkgraphStatus.SCOUTING.value, WorkgraphStatus.ACTIVE.value]),
        )
        .group_by(log.WorkgraphID)
    )
    return {bytes(r.WorkgraphID): r.started for r in rows}


_OWNER = (ownership.c.OwnershipID, ownership.c.VO, ownership.c.Sub)


@dataclass(frozen=True)
class WorkgraphRecord:
    """A Workgraphs row with its owner (its Ownership row)."""

    workgraph_id: bytes
    type: str
    status: str
    stripped_spec: Any  # the JSON document, as stored
    annotations: Any  # JSON, as stored
    hooks: Any  # JSON, as stored
    updated_at: datetime
    ownership_id: bytes
    vo: str
    sub: str


def _workgraph_record(row: Any) -> WorkgraphRecord:
    return WorkgraphRecord(
        workgraph_id=bytes(row.WorkgraphID),
        type=row.Type,
        status=row.Status,
        stripped_spec=row.StrippedSpec,
        annotations=row.Annotations,
        hooks=row.Hooks,
        updated_at=row.UpdatedAt,
        ownership_id=bytes(row.OwnershipID),
        vo=row.VO,
        sub=row.Sub,
    )


async def lock_workgraph(conn: AsyncConnection, workgraph_id: bytes) -> WorkgraphRecord | None:
    """The workgraph with its owner, its row locked until the transaction ends: every status
    change of it or of a member takes this lock first, so they are serialised per workgraph."""
    result = await conn.execute(
        sa.select(workgraphs, *_OWNER)
        .join(ownership, ownership.c.WorkgraphID == workgraphs.c.WorkgraphID)
        .where(workgraphs.c.WorkgraphID == workgraph_id)
        .with_for_update()
    )
    row = result.one_or_none()
    return _workgraph_record(row) if row is not None else None


async def workgraph_status(conn: AsyncConnection, workgraph_id: bytes) -> str | None:
    return await conn.scalar(
        sa.select(workgraphs.c.Status).where(workgraphs.c.WorkgraphID == workgraph_id)
    )


async def members_of(conn: AsyncConnection, ownership_id: bytes) -> list[TransformationState]:
    """A workgraph's members (every transformation of its ownership row), in id order."""
    result = await conn.execute(
        sa.select(*STATE_COLUMNS)
        .where(transformations.c.OwnershipID == ownership_id)
        .order_by(transformations.c.TransformationID)
    )
    return [state_record(row) for row in result]


async def set_workgraph_status(
    conn: AsyncConnection, workgraph_id: bytes, source: str, target: str, now: datetime
) -> int:
    """The conditional UPDATE of a workgraph transition: 1 if it was still in `source`."""
    result = await conn.execute(
        sa.update(workgraphs)
        .where(workgraphs.c.WorkgraphID == workgraph_id, workgraphs.c.Status == source)
        .values(Status=target, UpdatedAt=now)
    )
    return int(result.rowcount)


async def set_workgraph_annotations(
    conn: AsyncConnection, workgraph_id: bytes, annotations: Any, now: datetime
) -> None:
    await conn.execute(
        sa.update(workgraphs)
        .where(workgraphs.c.WorkgraphID == workgraph_id)
        .values(Annotations=annotations, UpdatedAt=now)
    )


async def workgraph_rows(
    conn: AsyncConnection,
    *,
    ids: Iterable[bytes] | None = None,
    vo: str | None = None,
    statuses: Iterable[str] = (),
    type: str | None = None,
    owner_sub: str | None = None,
    labels: dict[str, str] | None = None,
    after: bytes | None = None,
    limit: int | None = None,
) -> list[WorkgraphRecord]:
    """Workgraphs with their owner, in id (creation) order; every filter given must match."""
    query = sa.select(workgraphs, *_OWNER).join(
        ownership, ownership.c.WorkgraphID == workgraphs.c.WorkgraphID
    )
    if ids is not None:
        query = query.where(workgraphs.c.WorkgraphID.in_(list(ids)))
    if vo is not None:
        query = query.where(ownership.c["VO"] == vo)
    wanted = list(statuses)
    if wanted:
        query = query.where(workgraphs.c.Status.in_(wanted))
    if type:
        query = query.where(workgraphs.c.Type == type)
    if owner_sub:
        query = query.where(ownership.c.Sub == owner_sub)
    for key, value in (labels or {}).items():
        query = query.where(workgraphs.c.Annotations[("labels", key)].as_string() == value)
    if after is not None:
        query = query.where(workgraphs.c.WorkgraphID > after)
    query = query.order_by(workgraphs.c.WorkgraphID)
    if limit is not None:
        query = query.limit(limit)
    return [_workgraph_record(r) for r in await conn.execute(query)]


async def member_ids(
    conn: AsyncConnection, ownership_ids: Iterable[bytes]
) -> dict[bytes, list[bytes]]:
    """OwnershipID → its transformations' ids, in id order."""
    wanted = list(set(ownership_ids))
    if not wanted:
        return {}
    result = await conn.execute(
        sa.select(transformations.c.OwnershipID, transformations.c.TransformationID)
        .where(transformations.c.OwnershipID.in_(wanted))
        .order_by(transformations.c.TransformationID)
    )
    found: dict[bytes, list[bytes]] = {o: [] for o in wanted}
    for owner, tid in result:
        found[bytes(owner)].append(bytes(tid))
    return found
