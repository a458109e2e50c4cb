"""The content store: Processes, Requirements and ResolvedHints, put-if-absent by hash.

These functions run inside the caller's transaction (a submission's, or another component's
that must commit a content-addressed row atomically with its own change) and compute the hash
themselves, so a row is always keyed by the hash of exactly what it holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.ids import content_hash
from dxts.definition import db


async def put_processes(
    conn: AsyncConnection,
    bodies: Sequence[dict[str, Any]],
    references: Iterable[tuple[bytes, bytes]] = (),
) -> list[bytes]:
    """Store process bodies (children before parents) and their ProcessReferences rows.

    A body's nested `run` must already be a `proc:sha256-…` reference to a stored (or same
    call) process; the references are the (parent, child) pairs those spell.
    """
    keyed = [(content_hash(body), body) for body in bodies]
    await db.put_processes(conn, list(dict(keyed).items()), sorted(set(references)))
    return [key for key, _ in keyed]


async def put_requirements(conn: AsyncConnection, sets: Sequence[dict[str, Any]]) -> list[bytes]:
    keyed = [(content_hash(value), value) for value in sets]
    await db.put_requirements(conn, list(dict(keyed).items()))
    return [key for key, _ in keyed]


async def put_resolved_hints(conn: AsyncConnection, hints: dict[str, Any]) -> bytes:
    key = content_hash(hints)
    await db.put_resolved_hints(conn, [(key, hints)])
    return key
