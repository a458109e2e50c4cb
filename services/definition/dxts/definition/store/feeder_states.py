"""What definition reads of execution's FeederStates rows: each feeder's bookmark, whether
it said NoMoreInputs, and why a quota holds it (`HeldReason`). The operator's switch
(Transformations.FeederEnabled) is definition's; a feeder is on while its switch is on and it
is not exhausted, which the drain guard, `why`, the lists and the commands enabling a feeder
need to know in their own transaction. Execution alone writes the rows (definition asks it to
reset them: `ExecutionService.ResetFeeders`); the read is declared in tests/test_ownership.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.schema.execution import feeder_states


class FeederState(NamedTuple):
    bookmark: Any
    exhausted: bool
    held: str | None = None  # why a quota holds the feeder (execution's HeldReason)


async def feeder_states_of(
    conn: AsyncConnection, transformation_ids: Sequence[bytes]
) -> dict[bytes, FeederState]:
    """The feeders of these transformations that have a row (one statement, no lock)."""
    if not transformation_ids:
        return {}
    c = feeder_states.c
    rows = await conn.execute(
        sa.select(c.TransformationID, c.Bookmark, c.Exhausted, c.HeldReason).where(
            c.TransformationID.in_(transformation_ids)
        )
    )
    return {
        bytes(r.TransformationID): FeederState(r.Bookmark, bool(r.Exhausted), r.HeldReason)
        for r in rows
    }
