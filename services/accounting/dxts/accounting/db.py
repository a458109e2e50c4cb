"""Every database access of the accounting service.

The counters are read through their construct (`Counter.read`: one statement, exact); the
statements written here are reads of the tables accounting owns (journals, counters, logs) and
of the server's InnoDB metrics. Accounting writes nothing with its own SQL: counter corrections
go through `Counter.rebuild` and log rows through `dxts.core.logs`.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc

from dxts.core.counters import DATA_PARCELS, TRANSFORMATION, Counter, Reading
from dxts.core.counters.construct import Key
from dxts.core.counters.locks import ensure_lock_rows
from dxts.core.db import Database, Isolation, utcnow
from dxts.core.logs import LogEntry, log_transformations
from dxts.core.schema.accounting import transformation_log, workgraph_log

log = logging.getLogger(__name__)

LOG_TABLES = {"transformation": transformation_log, "workgraph": workgraph_log}
LOG_OWNER_COLUMNS = {"transformation": "TransformationID", "workgraph": "WorkgraphID"}


async def prepare(database: Database) -> None:
    """Start-up: every declared counter has its CounterLocks rows (idempotent)."""
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        await ensure_lock_rows(conn)


async def read_transformation_counts(
    database: Database, transformation_ids: Collection[bytes], entities: Sequence[str]
) -> Reading:
    """The Transformation counter for these transformations and entities, in one statement."""
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        return await TRANSFORMATION.read(
            conn, {"TransformationID": list(transformation_ids), "Entity": list(entities)}
        )


async def read_storage(
    database: Database,
    transformation_ids: Collection[bytes] | None,
    storage_elements: Collection[str] | None,
) -> Reading:
    """The DataParcels counter, narrowed to these transformations / storage elements (None:
    all of them), in one statement."""
    where: dict[str, Any] = {}
    if transformation_ids is not None:
        where["TransformationID"] = list(transformation_ids)
    if storage_elements is not None:
        where["StorageElement"] = list(storage_elements)
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        return await DATA_PARCELS.read(conn, where)


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
) -> list[sa.Row[Any]]:
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
        return list(await conn.execute(statement.order_by(*order).limit(limit)))


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


@dataclass(frozen=True)
class JournalHealth:
    depth: int  # journal rows not folded yet
    oldest_age_s: float  # age of the oldest of them (0 when empty), by the database clock


async def journal_health(database: Database, counter: Counter) -> JournalHealth:
    journal = counter.journal_table
    statement = sa.select(sa.func.count(), sa.func.min(journal.c.InsertedAt), utcnow())
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        depth, oldest, now = (await conn.execute(statement.select_from(journal))).one()
    age = (now - oldest).total_seconds() if oldest is not None else 0.0
    return JournalHealth(int(depth), max(age, 0.0))


async def history_list_length(database: Database) -> int | None:
    """InnoDB's history list length (undo not yet purged); None on SQLite.

    Read from information_schema.INNODB_METRICS (`trx_rseg_history_len`, a counter both
    MariaDB and MySQL 8 keep enabled by default) rather than by parsing SHOW ENGINE INNODB
    STATUS, whose free-text layout differs between servers and versions.
    """
    if database.is_sqlite:
        return None
    statement = sa.text(
        "SELECT `COUNT` FROM information_schema.INNODB_METRICS WHERE NAME = 'trx_rseg_history_len'"
    )
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        value = await conn.scalar(statement)
    return None if value is None else int(value)


async def negative_keys(database: Database, counter: Counter) -> list[Key]:
    """Every key of `counter` whose value (counters + journal) is negative: proof of drift.

    The whole counter in one statement, like `Counter.read`, but returning only the
    drifted keys, so that a periodic check costs one scan and no transfer.
    """
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        return [tuple(row) for row in await conn.execute(_negative_statement(counter))]


def _negative_statement(counter: Counter) -> sa.Select[Any]:
    counters, journal = counter.counters_table.c, counter.journal_table.c
    both = sa.union_all(
        sa.select(
            *(counters[k] for k in counter.key_names), *(counters[m] for m in counter.measures)
        ),
        sa.select(
            *(journal[k] for k in counter.key_names),
            *(journal[f"{m}Delta"].label(_quoted(m)) for m in counter.measures),
        ),
    ).subquery("t")
    keys = [both.c[k] for k in counter.key_names]
    return (
        sa.select(*keys)
        .group_by(*keys)
        .having(sa.or_(*(sa.func.sum(both.c[m]) < 0 for m in counter.measures)))
    )


def _quoted(name: str) -> sa.sql.elements.quoted_name:
    return sa.sql.elements.quoted_name(name, True)
