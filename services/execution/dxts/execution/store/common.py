"""Row helpers every area of execution shares: conditional bulk input moves with their journal,
id lists cut to a size every database accepts.

A move is one conditional `UPDATE ... WHERE Status = :from` per chunk of ids: its row count is
what the transaction found under its own row locks, and exactly that is journalled, in the
caller's transaction (docs/counters.md). The state machine is consulted first, so a move the
machine does not have is refused before any SQL runs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.counters import journal_input_transition
from dxts.core.db import Database
from dxts.core.schema.execution import BY_PRIMARY_KEY, inputs
from dxts.core.state_machines import INPUT, Actor

# Ids per IN list: well under SQLite's bound-parameter ceiling (32766), and under MariaDB's
# in_predicate_conversion_threshold (1,000), past which a SELECT's IN list becomes a derived
# table that MariaDB was seen joining to the transformation's every Inputs row (seconds a
# read at a million) instead of probing the primary key.
IN_CHUNK = 900

T = TypeVar("T")


def writers_side_by_side(database: Database, wanted: int) -> int:
    """How many writing transactions are worth running at once: `wanted` on a server, one on
    SQLite, whose writers queue on its one write lock anyway."""
    return 1 if database.is_sqlite else wanted


def case_size(count: int) -> int:
    """The size a CASE over `count` keys is written with: `count` rounded up to the next of
    eight steps per power of two (at most 1/8 padding, unused WHENs NULL, which match no row),
    so that a handful of statement shapes, each built and compiled once, serve every batch."""
    step = 1 << max(0, count.bit_length() - 4)
    return -(-count // step) * step


def chunked(items: Sequence[T], size: int = IN_CHUNK) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


async def move_inputs(
    conn: AsyncConnection,
    transformation_id: bytes,
    input_ids: Sequence[bytes],
    *,
    source: str,
    target: str,
    actor: Actor,
    now: datetime,
    values: Mapping[str, Any] | None = None,
) -> int:
    """Move the inputs among `input_ids` that are in `source` to `target` (setting `values`
    too), journal the move, and return how many moved."""
    INPUT.check(source, target, actor)
    moved = 0
    for chunk in chunked(input_ids):
        result = await conn.execute(
            sa.update(inputs)
            .with_hint(BY_PRIMARY_KEY, dialect_name="mysql")
            .where(
                inputs.c.TransformationID == transformation_id,
                inputs.c.InputID.in_(chunk),
                inputs.c.Status == source,
            )
            .values(Status=target, UpdatedAt=now, **(values or {}))
        )
        moved += result.rowcount
    await journal_input_transition(conn, transformation_id, source, target, moved)
    return moved
