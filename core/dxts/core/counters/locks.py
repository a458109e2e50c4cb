"""CounterLocks: the rows that serialise each counter's maintenance operations.

One row per (counter, operation). `fold` is held by the aggregator for the length of one fold;
`rebuild` by a rebuild for the length of its transaction; `delete_scope` takes `rebuild` then
`fold`, in that order, so it waits for both and neither can resurrect what it deletes. Writers
never touch these rows: journal() takes no lock here.

The rows must exist before a fold or rebuild runs (a `FOR UPDATE` on a missing row locks
nothing, which would silently drop the mutual exclusion), so taking a lock whose row is missing
is refused rather than ignored. The rows are written by the migration that creates the table,
by `metadata.create_all` (an `after_create` hook), and by `ensure_lock_rows(conn)`, which is
idempotent and safe to call at every start-up.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.errors import FailedPrecondition
from dxts.core.schema.metadata import MYSQL_TABLE_OPTIONS, metadata
from dxts.core.schema.types import Enum
from dxts.core.states import values


class Operation(StrEnum):
    REBUILD = "rebuild"
    FOLD = "fold"


counter_locks = sa.Table(
    "CounterLocks",
    metadata,
    sa.Column("CounterName", sa.String(64), primary_key=True, quote=True),
    sa.Column("Operation", Enum("CounterOperation", values(Operation)), primary_key=True),
    quote=True,
    **MYSQL_TABLE_OPTIONS,
)

# Names of the declared counters, filled by `Counter.__init__` (dxts.core.counters.construct).
declared: list[str] = []


def lock_rows(names: Iterable[str]) -> list[dict[str, str]]:
    return [{"CounterName": name, "Operation": op.value} for name in names for op in Operation]


def _insert_missing(connection: sa.Connection, names: Iterable[str]) -> None:
    """Insert the lock rows of `names` that are not there yet (concurrent callers are fine)."""
    rows = lock_rows(names)
    if not rows:
        return
    if connection.dialect.name == "sqlite":
        connection.execute(sqlite.insert(counter_locks).values(rows).on_conflict_do_nothing())
    else:
        statement = mysql.insert(counter_locks).values(rows)
        # A no-op update rather than INSERT IGNORE, which would also swallow real errors.
        connection.execute(
            statement.on_duplicate_key_update(Operation=statement.inserted.Operation)
        )


async def ensure_lock_rows(conn: AsyncConnection) -> None:
    """Make sure every declared counter has its `rebuild` and `fold` rows; idempotent."""
    await conn.run_sync(_insert_missing, list(declared))


@sa.event.listens_for(counter_locks, "after_create")
def _seed_after_create(target: sa.Table, connection: sa.Connection, **_: Any) -> None:
    _insert_missing(connection, list(declared))


async def take(conn: AsyncConnection, counter: str, operation: Operation) -> None:
    """Lock this counter's `operation` row until the transaction ends (SQLite: its one writer)."""
    held = await conn.scalar(
        sa.select(counter_locks.c.CounterName)
        .where(
            counter_locks.c.CounterName == counter,
            counter_locks.c.Operation == operation.value,
        )
        .with_for_update()
    )
    if held is None:
        raise FailedPrecondition(
            f"CounterLocks has no ({counter!r}, {operation.value!r}) row: run `dxts-db upgrade` "
            "(or ensure_lock_rows) before folding or rebuilding"
        )
