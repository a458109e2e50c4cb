"""SQL of the `after` wait: what became of files in the transformations a Data member waits on.

DX-ADR-004: "what became of a file in a consumer is a lookup of its LFN in the consumer's
Inputs, whose (TransformationID, LFN) index exists for it". One statement per chunk of LFNs
for every consumer at once: `TransformationID IN (...) AND LFN IN (...)` is a set of ranges of
that index.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.schema.execution import inputs
from dxts.core.states import InputStatus
from dxts.execution.store.common import chunked


async def consumed(
    conn: AsyncConnection, lfns: Sequence[str], consumers: Sequence[bytes]
) -> dict[bytes, dict[str, list[InputStatus]]]:
    """Consumer → LFN → the statuses of its Inputs rows for that LFN (absent: never fed)."""
    found: dict[bytes, dict[str, list[InputStatus]]] = {c: {} for c in consumers}
    if not consumers:
        return found
    for names in chunked(sorted(set(lfns))):
        rows = await conn.execute(
            sa.select(inputs.c.TransformationID, inputs.c.LFN, inputs.c.Status).where(
                inputs.c.TransformationID.in_(list(consumers)), inputs.c.LFN.in_(names)
            )
        )
        for r in rows:
            files = found[bytes(r.TransformationID)]
            files.setdefault(r.LFN, []).append(InputStatus(r.Status))
    return found
