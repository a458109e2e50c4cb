"""All SQL of the definition service (workgraph creation, process registry, lineage).

Every function takes the caller's connection, so it runs inside whatever transaction the caller
opened; writes are one multi-row INSERT per table. The content-addressed rows (Processes,
Requirements, ResolvedHints) are written through `dxts.core.content_store`, which other
components also call inside their own transactions.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.db import db_now
from dxts.core.schema.definition import (
    actions,
    compute_transformations,
    ownership,
    process_references,
    process_registry,
    processes,
    transformation_outputs,
    transformations,
    workgraphs,
)


async def existing_processes(conn: AsyncConnection, ids: Iterable[bytes]) -> set[bytes]:
    wanted = list(set(ids))
    if not wanted:
        return set()
    result = await conn.execute(
        sa.select(processes.c.ProcessID).where(processes.c.ProcessID.in_(wanted))
    )
    return {bytes(row[0]) for row in result}


async def get_processes(conn: AsyncConnection, ids: Iterable[bytes]) -> dict[bytes, Any]:
    wanted = list(set(ids))
    if not wanted:
        return {}
    result = await conn.execute(
        sa.select(processes.c.ProcessID, processes.c.Process).where(
            processes.c.ProcessID.in_(wanted)
        )
    )
    return {bytes(row.ProcessID): row.Process for row in result}


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
    await conn.execute(
        sa.insert(transformations).values([{**m, "UpdatedAt": now} for m in members])
    )
    if compute:
        await conn.execute(sa.insert(compute_transformations).values(compute))
    if outputs:
        await conn.execute(sa.insert(transformation_outputs).values(outputs))
    if action_rows:
        await conn.execute(
            sa.insert(actions).values(
                [{"WorkgraphID": None, "TransformationID": None, **a} for a in action_rows]
            )
        )
    return now


# -- process registry -------------------------------------------------------------------------


async def registry_lookup(
    conn: AsyncConnection, vo: str, names: Iterable[tuple[str, str]]
) -> dict[tuple[str, str], bytes]:
    wanted = list(set(names))
    if not wanted:
        return {}
    result = await conn.execute(
        sa.select(process_registry.c.Name, process_registry.c.Version, process_registry.c.ProcessID)
        .filter_by(VO=vo)
        .where(sa.tuple_(process_registry.c.Name, process_registry.c.Version).in_(wanted))
    )
    return {(row.Name, row.Version): bytes(row.ProcessID) for row in result}


async def insert_registry_entry(
    conn: AsyncConnection, *, vo: str, name: str, version: str, process_id: bytes, author: str
) -> None:
    now = await db_now(conn)
    await conn.execute(
        sa.insert(process_registry).values(
            VO=vo, Name=name, Version=version, ProcessID=process_id, Author=author, CreatedAt=now
        )
    )


async def registry_versions(conn: AsyncConnection, vo: str, name: str) -> list[Any]:
    result = await conn.execute(
        sa.select(
            process_registry.c.Version,
            process_registry.c.ProcessID,
            process_registry.c.Author,
            process_registry.c.CreatedAt,
        )
        .filter_by(VO=vo, Name=name)
        .order_by(process_registry.c.CreatedAt, process_registry.c.Version)
    )
    return list(result.all())


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
