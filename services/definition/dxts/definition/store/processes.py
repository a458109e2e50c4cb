"""SQL of the stored processes and their references (lineage); the content-addressed rows
are written through `dxts.core.content_store`, read here.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.schema.definition import compute_transformations, process_references, processes


async def existing_processes(conn: AsyncConnection, ids: Iterable[bytes]) -> set[bytes]:
    wanted = list(set(ids))
    if not wanted:
        return set()
    result = await conn.execute(
        sa.select(processes.c.ProcessID).where(processes.c.ProcessID.in_(wanted))
    )
    return {bytes(row[0]) for row in result}


async def get_processes(conn: AsyncConnection, ids: Iterable[bytes]) -> dict[bytes, dict[str, Any]]:
    """Process documents by hash."""
    wanted = list(set(ids))
    if not wanted:
        return {}
    result = await conn.execute(
        sa.select(processes.c.ProcessID, processes.c.Process).where(
            processes.c.ProcessID.in_(wanted)
        )
    )
    return {bytes(row.ProcessID): row.Process for row in result}


async def process_children(
    conn: AsyncConnection, parents: Iterable[bytes]
) -> set[tuple[bytes, bytes]]:
    wanted = list(set(parents))
    if not wanted:
        return set()
    result = await conn.execute(
        sa.select(process_references.c.ParentProcessID, process_references.c.ChildProcessID).where(
            process_references.c.ParentProcessID.in_(wanted)
        )
    )
    return {(bytes(p), bytes(c)) for p, c in result}


async def process_parents(
    conn: AsyncConnection, children: Iterable[bytes]
) -> set[tuple[bytes, bytes]]:
    wanted = list(set(children))
    if not wanted:
        return set()
    result = await conn.execute(
        sa.select(process_references.c.ParentProcessID, process_references.c.ChildProcessID).where(
            process_references.c.ChildProcessID.in_(wanted)
        )
    )
    return {(bytes(p), bytes(c)) for p, c in result}


async def transformations_running(
    conn: AsyncConnection, process_ids: Iterable[bytes]
) -> list[tuple[bytes, bytes]]:
    """(TransformationID, ProcessID) of every compute transformation running one of them."""
    wanted = list(set(process_ids))
    if not wanted:
        return []
    result = await conn.execute(
        sa.select(compute_transformations.c.TransformationID, compute_transformations.c.ProcessID)
        .where(compute_transformations.c.ProcessID.in_(wanted))
        .order_by(compute_transformations.c.TransformationID)
    )
    return [(bytes(t), bytes(p)) for t, p in result]


class StoredProcess(NamedTuple):
    """A Processes row: the document under its hash, and when it was first stored."""

    process_id: bytes
    document: dict[str, Any]
    created_at: datetime


async def process_rows(conn: AsyncConnection, ids: Iterable[bytes]) -> list[StoredProcess]:
    """Processes (body and CreatedAt) by hash."""
    wanted = list(set(ids))
    if not wanted:
        return []
    result = await conn.execute(sa.select(processes).where(processes.c.ProcessID.in_(wanted)))
    return [StoredProcess(bytes(r.ProcessID), r.Process, r.CreatedAt) for r in result]
