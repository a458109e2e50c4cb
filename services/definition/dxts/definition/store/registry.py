"""SQL of the process registry: VO-scoped names (name@version) of stored processes."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, NamedTuple

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


class RegisteredVersion(NamedTuple):
    """A ProcessRegistry row: `vo`'s name@version pointing at a process."""

    vo: str
    name: str
    version: str
    process_id: bytes
    author: str
    created_at: datetime


def _registered(row: Any) -> RegisteredVersion:
    return RegisteredVersion(
        row.VO, row.Name, row.Version, bytes(row.ProcessID), row.Author, row.CreatedAt
    )


async def registry_versions(conn: AsyncConnection, vo: str, name: str) -> list[RegisteredVersion]:
    """Every version of `vo`'s `name`, oldest first."""
    result = await conn.execute(
        sa.select(process_registry)
        .filter_by(VO=vo, Name=name)
        .order_by(process_registry.c.CreatedAt, process_registry.c.Version)
    )
    return [_registered(row) for row in result]


async def registry_names(
    conn: AsyncConnection, vo: str, process_id: bytes
) -> list[RegisteredVersion]:
    """Every name@version of `vo` pointing at `process_id`."""
    result = await conn.execute(
        sa.select(process_registry)
        .filter_by(VO=vo, ProcessID=process_id)
        .order_by(process_registry.c.Name, process_registry.c.CreatedAt)
    )
    return [_registered(row) for row in result]


async def named_by(conn: AsyncConnection, vo: str, process_ids: Iterable[bytes]) -> set[bytes]:
    """Those of `process_ids` that a name@version of `vo` points at."""
    wanted = list(set(process_ids))
    if not wanted:
        return set()
    result = await conn.execute(
        sa.select(process_registry.c.ProcessID)
        .filter_by(VO=vo)
        .where(process_registry.c.ProcessID.in_(wanted))
        .distinct()
    )
    return {bytes(row[0]) for row in result}
