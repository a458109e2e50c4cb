"""The lock row of one owner's active-workgraphs quota (`WorkgraphQuotaLocks`): held by a
submission or a start of that owner's from before it counts the owner's workgraphs until its
transaction ends, so that two at once take turns (the second counts what the first created or
started) and never both pass at the limit. A count alone takes no lock: at READ COMMITTED two
transactions both count before either commits."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.schema.definition import workgraph_quota_locks


async def lock_owner(conn: AsyncConnection, vo: str, sub: str) -> None:
    """Hold the owner's lock row exclusively until the transaction ends, creating it when
    missing (a no-op update on a duplicate rather than INSERT IGNORE, which swallows real
    errors). SQLite: the transaction already holds the one writer's lock."""
    row = {"VO": vo, "Sub": sub}
    if conn.dialect.name == "sqlite":
        await conn.execute(sqlite.insert(workgraph_quota_locks).on_conflict_do_nothing(), [row])
        return
    statement = mysql.insert(workgraph_quota_locks)
    await conn.execute(statement.on_duplicate_key_update(VO=statement.inserted.VO), [row])
    c = workgraph_quota_locks.c
    await conn.execute(sa.select(c.Sub).where(c["VO"] == vo, c.Sub == sub).with_for_update())
