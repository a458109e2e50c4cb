"""The transformation and workgraph logs: pages in keyset order, and the rebuild corrections
appended through `dxts.core.logs`."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc

from dxts.core.db import Database, Isolation
from dxts.core.logs import LogEntry, log_transformations
from dxts.core.schema.accounting import transformation_log, workgraph_log

log = logging.getLogger(__name__)

LOG_TABLES = {"transformation": transformation_log, "workgraph": workgraph_log}
LOG_OWNER_COLUMNS = {"transformation": "TransformationID", "workgraph": "WorkgraphID"}


@dataclass(frozen=True)
class LogRow:
    """One TransformationLog or WorkgraphLog row; `owner_id` is its transformation's or
    workgraph's id, whichever log it is in."""

    log_id: int
    owner_id: bytes
    event_type: str
    old_status: str | None
    new_status: str | None
    author: str
    message: str | None
    data: Any  # the JSON data, as stored
    created_at: datetime


@dataclass(frozen=True)
class LogPosition:
    """Where a log page ends: the last row's (CreatedAt, LogID), the keyset order."""

    created_at: datetime
    log_id: int


async def log_rows(
    database: Database,
    owner: str,
    owner_id: bytes,
    *,
    since: datetime | None,
    newest_first: bool,
    after: LogPosition | None,
    limit: int,
) -> list[LogRow]:
    """Up to `limit` log rows of one workgraph or transformation (`owner`), in (CreatedAt,
    LogID) order, descending when `newest_first`, starting after `after`.

    Keyset paging over the (owner, CreatedAt) index (InnoDB appends the LogID primary key to
    it): a page costs the same wherever it is, and rows appended meanwhile are not skipped.
    """
    table = LOG_TABLES[owner]
    created, log_id = table.c.CreatedAt, table.c.LogID
    statement = sa.select(table).where(table.c[LOG_OWNER_COLUMNS[owner]] == owner_id)
    if since is not None:
        statement = statement.where(created >= since)
    if after is not None:
        if newest_first:
            beyond = sa.or_(
                created < after.created_at,
                sa.and_(created == after.created_at, log_id < after.log_id),
            )
        else:
            beyond = sa.or_(
                created > after.created_at,
                sa.and_(created == after.created_at, log_id > after.log_id),
            )
        statement = statement.where(beyond)
    order = (created.desc(), log_id.desc()) if newest_first else (created.asc(), log_id.asc())
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        rows = await conn.execute(statement.order_by(*order).limit(limit))
        owner_column = LOG_OWNER_COLUMNS[owner]
        return [
            LogRow(
                row.LogID,
                row._mapping[owner_column],
                row.EventType,
                row.OldStatus,
                row.NewStatus,
                row.Author,
                row.Message,
                row.Data,
                row.CreatedAt,
            )
            for row in rows
        ]


async def append_transformation_logs(
    database: Database, entries: Sequence[LogEntry], *, isolation: Isolation
) -> int:
    """Append TransformationLog rows in a transaction of their own; returns how many.

    Used after a rebuild, which committed on its own: a correction keyed on a transformation
    that no longer exists (counters have no foreign keys, the log has) cannot be logged there,
    so that case is logged here instead of failing the repair that already happened.
    """
    if not entries:
        return 0
    try:
        async with database.transaction(isolation) as conn:
            return await log_transformations(conn, entries)
    except exc.IntegrityError as error:
        log.warning("rebuild corrections not written to TransformationLog: %s", error.orig)
        return 0
