"""SQL of the process registry: VO-scoped names (name@version) of stored processes."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.db import db_now
from dxts.core.schema.definition import process_registry


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


async def registry_names(conn: AsyncConnection, vo: str, process_id: bytes) -> list[Any]:
    """Every name@version of `vo` pointing at `process_id`."""
    result = await conn.execute(
        sa.select(process_registry)
        .filter_by(VO=vo, ProcessID=process_id)
        .order_by(process_registry.c.Name, process_registry.c.CreatedAt)
    )
    return list(result.all())
