"""The content store: Processes, Requirements and ResolvedHints, put-if-absent by hash.

Content-addressed rows are the one kind of definition-side row other components write
(docs/architecture.md): the dispatcher stores resolved-hints sidecars and execution stores merged
requirement sets, each inside its own transaction, so the function lives in core rather than in
the definition service. Each function computes the hash itself, so a row is always keyed by the
hash of exactly what it holds, and inserting a hash that exists is a no-op (`ON DUPLICATE KEY
UPDATE` of the key on MariaDB/MySQL, `ON CONFLICT DO NOTHING` on SQLite): two writers storing the
same document at once both succeed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.db import db_now
from dxts.core.ids import content_hash
from dxts.core.schema.definition import (
    process_references,
    processes,
    requirements,
    resolved_hints,
)


async def _put_if_absent(
    conn: AsyncConnection, table: sa.Table, rows: list[dict[str, Any]]
) -> None:
    if not rows:
        return
    if conn.dialect.name == "sqlite":
        await conn.execute(sqlite.insert(table).on_conflict_do_nothing(), rows)
        return
    statement = mysql.insert(table)
    key = table.primary_key.columns[0].name
    await conn.execute(statement.on_duplicate_key_update({key: statement.inserted[key]}), rows)


async def put_processes(
    conn: AsyncConnection,
    bodies: Sequence[dict[str, Any]],
    references: Iterable[tuple[bytes, bytes]] = (),
) -> list[bytes]:
    """Store process bodies (children before parents) and their ProcessReferences rows.

    A body's nested `run` must already be a `proc:sha256-…` reference to a stored (or same
    call) process; the references are the (parent, child) pairs those spell.
    """
    keyed = [(content_hash(body, field="process"), body) for body in bodies]
    now = await db_now(conn)
    await _put_if_absent(
        conn,
        processes,
        [{"ProcessID": h, "Process": b, "CreatedAt": now} for h, b in dict(keyed).items()],
    )
    await _put_if_absent(
        conn,
        process_references,
        [{"ParentProcessID": p, "ChildProcessID": c} for p, c in sorted(set(references))],
    )
    return [key for key, _ in keyed]


async def put_requirements(conn: AsyncConnection, sets: Sequence[dict[str, Any]]) -> list[bytes]:
    """Store requirement sets (templates or per-parcel merges); returns their hashes in order."""
    keyed = [(content_hash(value, field="requirements"), value) for value in sets]
    now = await db_now(conn)
    await _put_if_absent(
        conn,
        requirements,
        [
            {"RequirementsID": h, "Requirements": r, "CreatedAt": now}
            for h, r in dict(keyed).items()
        ],
    )
    return [key for key, _ in keyed]


async def put_resolved_hints(conn: AsyncConnection, hints: dict[str, Any]) -> bytes:
    """Store one resolved-hints sidecar (the defaults a parcel ran under); returns its hash."""
    key = content_hash(hints, field="hints")
    now = await db_now(conn)
    await _put_if_absent(
        conn, resolved_hints, [{"ResolvedHintsID": key, "Hints": hints, "CreatedAt": now}]
    )
    return key
