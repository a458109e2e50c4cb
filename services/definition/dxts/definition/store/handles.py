"""SQL of workgraph and transformation handles (`wg-42`, `t-7`): minted with the rows they
name, read by id or by number, each an index probe (see `dxts.core.schema.handles`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.bulk import insert_rows
from dxts.core.schema.definition import ownership, transformations, workgraphs
from dxts.core.schema.handles import transformation_handles, workgraph_handles


async def mint(
    conn: AsyncConnection, workgraph_id: bytes, transformation_ids: Sequence[bytes]
) -> None:
    """The handles of a new workgraph and its members: one statement per table."""
    await insert_rows(conn, workgraph_handles, [{"WorkgraphID": workgraph_id}])
    await insert_rows(
        conn, transformation_handles, [{"TransformationID": t} for t in transformation_ids]
    )


async def workgraph_numbers(conn: AsyncConnection, ids: Iterable[bytes]) -> dict[bytes, int]:
    wanted = list(ids)
    if not wanted:
        return {}
    rows = await conn.execute(
        sa.select(workgraph_handles.c.WorkgraphID, workgraph_handles.c.Number).where(
            workgraph_handles.c.WorkgraphID.in_(wanted)
        )
    )
    return {bytes(i): int(n) for i, n in rows}


async def transformation_numbers(conn: AsyncConnection, ids: Iterable[bytes]) -> dict[bytes, int]:
    wanted = list(ids)
    if not wanted:
        return {}
    rows = await conn.execute(
        sa.select(transformation_handles.c.TransformationID, transformation_handles.c.Number).where(
            transformation_handles.c.TransformationID.in_(wanted)
        )
    )
    return {bytes(i): int(n) for i, n in rows}


async def workgraph_of_number(conn: AsyncConnection, number: int) -> bytes | None:
    found = await conn.scalar(
        sa.select(workgraph_handles.c.WorkgraphID).where(workgraph_handles.c.Number == number)
    )
    return bytes(found) if found is not None else None


async def transformation_of_number(conn: AsyncConnection, number: int) -> bytes | None:
    found = await conn.scalar(
        sa.select(transformation_handles.c.TransformationID).where(
            transformation_handles.c.Number == number
        )
    )
    return bytes(found) if found is not None else None


async def ids_in_range(
    conn: AsyncConnection, low: bytes, high: bytes, *, limit: int
) -> list[tuple[str, bytes]]:
    """("workgraph" | "transformation", id) of every id between `low` and `high` (an id
    prefix's range: a range scan of each primary key), at most `limit` of each kind."""
    found: list[tuple[str, bytes]] = []
    for kind, column in (
        ("workgraph", workgraphs.c.WorkgraphID),
        ("transformation", transformations.c.TransformationID),
    ):
        rows = await conn.execute(
            sa.select(column).where(column.between(low, high)).order_by(column).limit(limit)
        )
        found += [(kind, bytes(i)) for (i,) in rows]
    return found


async def member_of_step(conn: AsyncConnection, workgraph_id: bytes) -> dict[str, bytes]:
    """The step name (annotation `id`) → transformation id of a workgraph's members."""
    rows = await conn.execute(
        sa.select(transformations.c.TransformationID, transformations.c.Annotations)
        .join(ownership, ownership.c.OwnershipID == transformations.c.OwnershipID)
        .where(ownership.c.WorkgraphID == workgraph_id)
    )
    steps: dict[str, bytes] = {}
    for tid, notes in rows:
        step = (notes or {}).get("id") if isinstance(notes, dict) else None
        if step:
            steps[str(step)] = bytes(tid)
    return steps
